"""A real project's release as a task's starting repository: fetched from the package registry, pinned, cached.

Stdlib only. A byte-identical copy of this file, installed when the task loads (bench/shared_files.py), is the
`environment/generate.py` of every real-repository task of suite v1 (bench/task.materialize runs it as
`python -I generate.py REPO` on a copy of environment/repo/). The copied folder holds one file, `.sdist.json`:

    {"package": "semver", "version": "3.0.1", "file": "semver-3.0.1.tar.gz", "sha256": "..."}

The script takes the source distribution from the cache ($COMPOSER2_SDIST_CACHE, else `sdists/` under
$COMPOSER2_BENCH_CACHE or the temp dir's composer2-bench-cache). A missing file is fetched as a file, never built:
the project's page on each package index the machine's pip is configured for (`pip config list`: index-url, else
PyPI, then extra-index-url; find-links folders; PIP_* variables; credentials in the URL or ~/.netrc; pip's `cert`
as the CA bundle) is read through the simple API (PEP 691 JSON, else PEP 503 HTML), the pinned file name is taken
from it and downloaded. No build backend runs, so a release whose metadata today's pip cannot parse still comes.
The script refuses a file whose sha256 is not the pinned one (an error naming the package, the version and the
index); unpacks it into REPO (the sdist's top folder stripped, no links, nothing outside REPO);
drops `.sdist.json` and the build metadata pip writes (PKG-INFO, *.egg-info); and commits the tree as one git
commit so the agent can `git diff` its work (fixed author and dates: the same bytes on every host).

Tasks written here on a real release add history: every `.history/NNN-name.patch` of the copied folder (a commit
message, a blank line, then a unified diff from the release's root) is applied and committed in name order, one
day apart, after the release's commit, and `.history/` is removed (read as written: a release whose files end lines
with CRLF, like lark's, keeps its CRs in the patch). The repository then shows the recent changes a
developer would find in `git log` (e.g. "the new feature" an instruction leaves unnamed).
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import netrc
import os
import re
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile

PIN = ".sdist.json"
HISTORY = ".history"
DROP = ("PKG-INFO",)  # build metadata of the sdist, not part of the project's source tree


def cache_dir() -> str:
    """Where sdists are kept between builds."""
    if os.environ.get("COMPOSER2_SDIST_CACHE"):
        return os.environ["COMPOSER2_SDIST_CACHE"]
    root = os.environ.get("COMPOSER2_BENCH_CACHE") or os.path.join(tempfile.gettempdir(), "composer2-bench-cache")
    return os.path.join(root, "sdists")


def sha256(path: str) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


PYPI = "https://pypi.org/simple/"
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
PIP_KEYS = ("index-url", "extra-index-url", "find-links", "cert", "no-index")


def pip_settings() -> dict:
    """The settings `pip download` would use for the keys in PIP_KEYS, as pip itself reports them.

    `pip config list` prints the merged configuration files (site over user over global) as `section.key='value'`,
    environment variables as `:env:.key`; for `pip download` an environment variable beats the [download] section,
    which beats [global]. PIP_* variables are read here too, so an interpreter without pip still honours them.
    """
    try:
        run = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=120, check=False)
        lines = run.stdout.splitlines() if run.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        lines = []
    rank = {"global": 0, "download": 1, ":env:": 2}
    best: dict = {}
    for line in lines:
        key, sep, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if not sep or section not in rank or name not in PIP_KEYS:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if rank[section] >= best.get(name, (-1, ""))[0]:
            best[name] = (rank[section], value)
    for name in PIP_KEYS:
        env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
        if env is not None:
            best[name] = (3, env)
    return {name: value for name, (_, value) in best.items()}


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def indexes(settings: dict) -> list:
    """The package indexes to ask, in pip's order: index-url (PyPI when unset) then each extra-index-url."""
    if _truthy(settings.get("no-index", "")):
        return []
    return [settings.get("index-url") or PYPI] + settings.get("extra-index-url", "").split()


def normalize(name: str) -> str:
    """A project's name as the simple API spells its page (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _redact(url: str) -> str:
    """url without its credentials (for messages)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


class _Links(html.parser.HTMLParser):
    """The anchors of a PEP 503 page: (href, text)."""

    def __init__(self):
        super().__init__()
        self.links: list = []
        self._href = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self.links.append([self._href, ""])

    def handle_data(self, data):
        if self._href is not None and self.links:
            self.links[-1][1] += data

    def handle_endtag(self, tag):
        if tag == "a":
            self._href = None


class Index:
    """One package index (or find-links location) read as pip would: credentials, CA bundle, file:// pages."""

    def __init__(self, url: str, cert: str | None = None):
        parts = urllib.parse.urlsplit(url)
        self.auth = None
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, netloc = netloc.rpartition("@")
            user, _, password = userinfo.partition(":")
            self.auth = (urllib.parse.unquote(user), urllib.parse.unquote(password))
        elif parts.scheme in ("http", "https"):
            try:
                found = netrc.netrc().authenticators(parts.hostname or "")
            except (OSError, netrc.NetrcParseError):
                found = None
            if found:
                self.auth = (found[0], found[2])
        self.url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
        self.host = netloc
        self.context = ssl.create_default_context(cafile=cert) if cert else None

    def open(self, url: str, accept: str | None = None):
        """A response for url (credentials sent only to the index's own host)."""
        request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
        if self.auth and urllib.parse.urlsplit(url).netloc == self.host:
            token = base64.b64encode(("%s:%s" % self.auth).encode()).decode()
            request.add_header("Authorization", "Basic " + token)
        if url.startswith("file:"):
            path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
            if os.path.isdir(path):
                url = urllib.parse.urljoin(url if url.endswith("/") else url + "/", "index.html")
                request = urllib.request.Request(url)
        return urllib.request.urlopen(request, timeout=180, context=self.context)

    def files(self, project: str) -> dict:
        """{file name: (url, sha256 or None)} of project's page; {} when the index has no such project."""
        page = self.url.rstrip("/") + "/" + normalize(project) + "/"
        try:
            with self.open(page, ACCEPT) as response:
                body = response.read()
                kind = response.headers.get("Content-Type", "") or ""
                page = response.geturl()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return {}
            raise
        except (FileNotFoundError, urllib.error.URLError) as e:
            if isinstance(e, FileNotFoundError) or isinstance(getattr(e, "reason", None), FileNotFoundError):
                return {}
            raise
        if "json" in kind:
            return {f["filename"]: (urllib.parse.urljoin(page, f["url"]), f.get("hashes", {}).get("sha256"))
                    for f in json.loads(body)["files"]}
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        out = {}
        for href, text in parser.links:
            if not href:
                continue
            url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
            digest = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
            name = text.strip() or urllib.parse.unquote(url.rstrip("/").rsplit("/", 1)[-1])
            out[name] = (url, digest)
        return out


def _download(index: Index, url: str, dest: str) -> str:
    """Stream url to dest; its sha256."""
    h = hashlib.sha256()
    with index.open(url) as response, open(dest, "wb") as out:
        for block in iter(lambda: response.read(1 << 20), b""):
            h.update(block)
            out.write(block)
    return h.hexdigest()


def fetch(pin: dict, settings: dict | None = None) -> str:
    """The pinned sdist's path in the cache, fetched once as a file from the configured indexes (never built).

    A file is looked for in the find-links folders first, then on each index's page for the project; ValueError
    if the file found (cached, in a folder or served) is not the pinned sha256, or if no index lists it.
    """
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, pin["file"])
    what = "%s==%s (%s)" % (pin["package"], pin["version"], pin["file"])
    if not os.path.isfile(path):
        settings = pip_settings() if settings is None else settings
        for link in settings.get("find-links", "").split():
            local = urllib.request.url2pathname(urllib.parse.urlsplit(link).path) if link.startswith("file:") else link
            if os.path.isfile(os.path.join(local, pin["file"])) and sha256(os.path.join(local, pin["file"])) == \
                    pin["sha256"]:
                shutil.copyfile(os.path.join(local, pin["file"]), path + ".part")
                os.replace(path + ".part", path)
                break
        else:
            _fetch_from_indexes(pin, settings, path, what)
    digest = sha256(path)
    if digest != pin["sha256"]:
        raise ValueError("%s: %s has sha256 %s; expected the pinned %s" % (what, path, digest, pin["sha256"]))
    return path


def _fetch_from_indexes(pin: dict, settings: dict, path: str, what: str) -> None:
    """Download the pinned file from the first index that lists it into path (atomically)."""
    asked = []
    cert = settings.get("cert") or None
    for url in indexes(settings):
        index = Index(url, cert)
        asked.append(_redact(url))
        try:
            listed = index.files(pin["package"])
        except (OSError, ValueError, urllib.error.URLError) as e:
            raise RuntimeError("%s: could not read the index %s: %s" % (what, _redact(url), e)) from e
        if pin["file"] not in listed:
            continue
        file_url, served = listed[pin["file"]]
        if served and served != pin["sha256"]:
            raise ValueError("%s: the index %s lists sha256 %s; expected the pinned %s (the file changed)" % (
                what, _redact(url), served, pin["sha256"]))
        with tempfile.NamedTemporaryFile(dir=os.path.dirname(path), suffix=".part", delete=False) as tmp:
            part = tmp.name
        try:
            got = _download(index, file_url, part)
            if got != pin["sha256"]:
                raise ValueError("%s: the index %s serves sha256 %s; expected the pinned %s (the file changed)" % (
                    what, _redact(url), got, pin["sha256"]))
            os.replace(part, path)
        finally:
            if os.path.exists(part):
                os.unlink(part)
        return
    raise RuntimeError("%s: no configured index lists the file (asked %s)" % (what, ", ".join(asked) or
                                                                               "none: pip's no-index is set"))


def _inside(root: str, name: str) -> str:
    """root/name with the archive's top folder stripped; ValueError if it leaves root."""
    rel = name.split("/", 1)[1] if "/" in name else ""
    target = os.path.realpath(os.path.join(root, rel))
    if rel and not target.startswith(os.path.realpath(root) + os.sep):
        raise ValueError("archive member %r leaves the repository" % name)
    return target if rel else ""


def unpack(archive: str, repo: str) -> None:
    """Extract the sdist's regular files into repo, its top folder stripped."""
    if archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                target = _inside(repo, info.filename)
                if target and not info.is_dir():
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with zf.open(info) as src, open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst)
        return
    with tarfile.open(archive) as tf:
        for member in tf.getmembers():
            target = _inside(repo, member.name)
            if target and member.isfile():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with tf.extractfile(member) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)


def strip_metadata(repo: str) -> None:
    """Remove the build metadata pip adds to an sdist (PKG-INFO, *.egg-info folders)."""
    for dirpath, dirnames, filenames in os.walk(repo):
        for d in [d for d in dirnames if d.endswith(".egg-info")]:
            shutil.rmtree(os.path.join(dirpath, d))
            dirnames.remove(d)
        if dirpath == repo:
            for f in DROP:
                if f in filenames:
                    os.unlink(os.path.join(dirpath, f))


def _git_env(repo: str, day: int) -> dict:
    """A fixed identity and a date `day` days after 2020-01-01 (the same bytes on every host)."""
    date = "2020-01-%02dT00:00:00Z" % (1 + day)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": repo, "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "maintainer", "GIT_AUTHOR_EMAIL": "maintainer@example.invalid",
            "GIT_COMMITTER_NAME": "maintainer", "GIT_COMMITTER_EMAIL": "maintainer@example.invalid",
            "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}


def commit(repo: str, message: str, day: int = 0, init: bool = True) -> None:
    """One git commit of the whole tree (skipped where git is missing)."""
    git = shutil.which("git")
    if git is None:
        return
    env = _git_env(repo, day)
    steps = ([["init", "-q", "-b", "main"]] if init else []) + [["add", "-A"], ["commit", "-q", "-m", message]]
    for args in steps:
        subprocess.run([git, "-C", repo] + args, env=env, check=True, capture_output=True, timeout=120)
    shutil.rmtree(os.path.join(repo, ".git", "hooks"), ignore_errors=True)


def replay(repo: str, history: str) -> int:
    """Apply and commit every patch of the history folder in name order; how many."""
    names = sorted(n for n in os.listdir(history) if n.endswith(".patch"))
    for day, name in enumerate(names, start=1):
        with open(os.path.join(history, name), encoding="utf-8", newline="") as f:  # CRLF sources keep their CRs
            text = f.read()
        message, sep, diff = text.partition("\ndiff --git ")
        if not sep:
            raise ValueError("%s: expected a commit message, then a diff starting with 'diff --git'" % name)
        run = subprocess.run(["patch", "-p1", "--batch", "--no-backup-if-mismatch", "-d", repo],
                             input="diff --git " + diff, capture_output=True, text=True, timeout=120, check=False)
        if run.returncode != 0:
            raise ValueError("%s does not apply: %s" % (name, (run.stdout + run.stderr)[-1000:]))
        commit(repo, message.strip(), day=day, init=False)
    return len(names)


def build(repo: str) -> dict:
    """Replace repo's pin file by the pinned release's source tree; the pin."""
    with open(os.path.join(repo, PIN), encoding="utf-8") as f:
        pin = json.load(f)
    archive = fetch(pin)
    os.unlink(os.path.join(repo, PIN))
    with tempfile.TemporaryDirectory() as tmp:
        history = None
        if os.path.isdir(os.path.join(repo, HISTORY)):
            history = os.path.join(tmp, HISTORY)
            shutil.move(os.path.join(repo, HISTORY), history)
        unpack(archive, repo)
        strip_metadata(repo)
        commit(repo, "%s %s" % (pin["package"], pin["version"]))
        if history is not None:
            replay(repo, history)
    return pin


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isfile(os.path.join(sys.argv[1], PIN)):
        raise SystemExit("usage: generate.py REPO (REPO holding %s, the pinned release)" % PIN)
    build(sys.argv[1])
