"""A real project's release as a task's starting repository: fetched from the package registry, pinned, cached.

Stdlib only. A byte-identical copy of this file is the `environment/generate.py` of every real-repository task of
suite v1 (bench/task.materialize runs it as `python -I generate.py REPO` on a copy of environment/repo/). The
copied folder holds one file, `.sdist.json`:

    {"package": "semver", "version": "3.0.1", "file": "semver-3.0.1.tar.gz", "sha256": "..."}

The script takes the source distribution from the cache ($COMPOSER2_SDIST_CACHE, else `sdists/` under
$COMPOSER2_BENCH_CACHE or the temp dir's composer2-bench-cache), downloading it with
`pip download --no-deps --no-binary :all: PACKAGE==VERSION` when it is missing; refuses a file whose sha256 is
not the pinned one; unpacks it into REPO (the sdist's top folder stripped, no links, nothing outside REPO);
drops `.sdist.json` and the build metadata pip writes (PKG-INFO, *.egg-info); and commits the tree as one git
commit so the agent can `git diff` its work (fixed author and dates: the same bytes on every host).

Tasks written here on a real release add history: every `.history/NNN-name.patch` of the copied folder (a commit
message, a blank line, then a unified diff from the release's root) is applied and committed in name order, one
day apart, after the release's commit, and `.history/` is removed (read as written: a release whose files end lines
with CRLF, like lark's, keeps its CRs in the patch). The repository then shows the recent changes a
developer would find in `git log` (e.g. "the new feature" an instruction leaves unnamed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
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


def fetch(pin: dict) -> str:
    """The pinned sdist's path in the cache, downloaded once; ValueError if its sha256 is not the pinned one."""
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, pin["file"])
    if not os.path.isfile(path):
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                   "--dest", tmp, "%s==%s" % (pin["package"], pin["version"])]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
            got = os.path.join(tmp, pin["file"])
            if run.returncode != 0 or not os.path.isfile(got):
                raise RuntimeError("could not download %s==%s (%s): %s" % (
                    pin["package"], pin["version"], pin["file"], (run.stdout + run.stderr)[-1500:]))
            os.replace(got, path)
    digest = sha256(path)
    if digest != pin["sha256"]:
        raise ValueError("%s: sha256 %s; expected the pinned %s" % (path, digest, pin["sha256"]))
    return path


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
