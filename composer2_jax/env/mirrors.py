"""The egress proxy's mirror map: URL patterns answered from local artifacts instead of the internet.

RL clusters have no open internet, yet published verifiers fetch tools at verification time
(`curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh`). A `MirrorMap` answers such URLs itself, in the phases that
turn it on (the verifier phase, verify/network.py):

    MirrorMap.from_dict({"mirrors": [
        {"url": "https://example.org/tool/{version}/tool.tar.gz", "file": "/srv/mirror/tool-{version}.tar.gz"},
        {"url": "https://example.org/blobs/{name}", "dir": "/srv/mirror/blobs"},          # dir/{the last field}
        {"url": "https://example.org/hello.txt", "text": "hello\\n"},
        {"url": "https://example.org/{version}/pkg.whl", "pypi": "pkg=={version}", "platform": "manylinux_2_17_x86_64"},
        {"url": "https://example.org/{version}/bin-{target}.tar.gz", "pypi": "tool=={version}", "pack": "scripts"},
    ]}, extend_defaults=True)

A URL pattern is a literal URL with `{field}` placeholders, each matching one path segment's text (no `/`); a
field's value, percent-decoded (never `.`, `..` or containing `/`), is substituted into the target's strings.
Targets: `file` (a local file), `dir` (a file of a local folder named by the pattern's last field), `text` (literal
text), `builtin` (`uv-installer`), or `pypi` (a package fetched once from the index the host's own pip is configured
for and cached: the wheel itself, or with `pack = "scripts"` its `*.data/scripts/` files as a tar.gz under one
folder, the layout of uv's release tarballs).
A `{target}` field (a Rust target triple such as x86_64-unknown-linux-gnu) chooses the wheel's platform.

`DEFAULT_MIRRORS` serve uv: both installer URLs (`https://astral.sh/uv/install.sh`, `.../uv/<version>/install.sh`)
answer a POSIX-sh installer that downloads the release tarball from uv's GitHub release URL, and that URL answers
the `uv` wheel's binaries from PyPI (the `uv` package ships them). The installer puts uv and uvx into
$UV_INSTALL_DIR, $XDG_BIN_HOME or ~/.local/bin and writes `env` there, as the real installer does (`source
$HOME/.local/bin/env`). Hosts of https patterns are intercepted (TLS terminated with the per-run CA, env/tls.py);
a request to such a host that no pattern matches is answered 404 and logged. No other host is intercepted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
TARGET_PLATFORMS = {  # Rust target triple -> wheel platform tag (uv publishes manylinux2014 / musllinux_1_1 wheels)
    "x86_64-unknown-linux-gnu": "manylinux_2_17_x86_64", "aarch64-unknown-linux-gnu": "manylinux_2_17_aarch64",
    "x86_64-unknown-linux-musl": "musllinux_1_1_x86_64", "aarch64-unknown-linux-musl": "musllinux_1_1_aarch64"}
KINDS = ("file", "dir", "text", "builtin", "pypi")
FETCH_TIMEOUT_S = 600
MIRRORS_ENV, CACHE_ENV = "COMPOSER2_MIRRORS", "COMPOSER2_MIRROR_CACHE"


class MirrorError(RuntimeError):
    """A mirror target could not be produced (missing file, package not on the index); the message says which."""


@dataclasses.dataclass(frozen=True)
class MirrorRule:
    """One URL pattern and what answers it (exactly one of the target kinds)."""

    url: str
    file: str | None = None
    dir: str | None = None
    text: str | None = None
    builtin: str | None = None
    pypi: str | None = None  # a requirement, e.g. "uv=={version}"
    platform: str | None = None  # the wheel platform (default: from {target}, else this host's)
    pack: str | None = None  # pypi only: None (the wheel) or "scripts" (the wheel's scripts as a tar.gz)
    content_type: str | None = None

    def __post_init__(self):
        kinds = [k for k in KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"mirror {self.url!r} has targets {kinds}; expected exactly one of {list(KINDS)}")
        split = urlsplit(self.url)
        if split.scheme not in ("http", "https") or not split.hostname or "{" in split.netloc:
            raise ValueError(f"mirror pattern {self.url!r}: expected an http(s) URL with a literal host")
        if self.dir is not None and not _FIELD.findall(self.url):
            raise ValueError(f"mirror {self.url!r}: a dir target needs a {{field}} naming the file")
        if self.builtin is not None and self.builtin not in BUILTINS:
            raise ValueError(f"mirror {self.url!r}: unknown builtin {self.builtin!r}; "
                             f"expected one of {sorted(BUILTINS)}")
        if self.pack not in (None, "scripts"):
            raise ValueError(f"mirror {self.url!r}: pack={self.pack!r}; expected \"scripts\" or nothing")
        pattern = "".join(f"(?P<{p}>[^/?#]+)" if i % 2 else re.escape(p)
                          for i, p in enumerate(_FIELD.split(self.url)))
        object.__setattr__(self, "_regex", re.compile(pattern + r"\Z"))

    @property
    def kind(self) -> str:
        """Which target answers it."""
        return next(k for k in KINDS if getattr(self, k) is not None)

    @property
    def host(self) -> tuple[str, int, str]:
        """(host, port, scheme) the pattern lives on."""
        s = urlsplit(self.url)
        return s.hostname.lower(), s.port or (443 if s.scheme == "https" else 80), s.scheme

    def match(self, url: str) -> dict[str, str] | None:
        """The pattern's fields for url (query string ignored), or None."""
        base = url.split("#", 1)[0].split("?", 1)[0]
        s = urlsplit(base)
        if s.port in (80, 443) and (s.scheme, s.port) in (("http", 80), ("https", 443)):
            base = base.replace(f"{s.hostname}:{s.port}", s.hostname, 1)
        m = self._regex.match(base)
        if m is None:
            return None
        fields = {k: unquote(v) for k, v in m.groupdict().items()}  # cpython-3.13.9%2B2025… names a file with "+"
        if any(v in (".", "..") or "/" in v or "\0" in v for v in fields.values()):
            return None
        return fields

    def to_dict(self) -> dict:
        """JSON-ready form (targets that are not set left out)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclasses.dataclass(frozen=True)
class Artifact:
    """What the proxy sends for a mirrored URL: a file on this host or bytes, and where they came from."""

    content_type: str
    source: str  # for the egress log: "file /srv/x", "pypi uv==0.9.5 (scripts)", "builtin uv-installer 0.9.5"
    path: str | None = None
    data: bytes | None = None

    def size(self) -> int:
        """Bytes of the body."""
        return os.path.getsize(self.path) if self.path is not None else len(self.data or b"")


def uv_installer(version: str | None) -> str:
    """A POSIX-sh uv installer: the release tarball from uv's GitHub release URL (mirrored from PyPI's `uv` wheel),
    uv and uvx into $UV_UNMANAGED_INSTALL, $UV_INSTALL_DIR, $XDG_BIN_HOME or ~/.local/bin, and the `env` file the
    real installer writes (shell profiles untouched with UV_NO_MODIFY_PATH, INSTALLER_NO_MODIFY_PATH or
    UV_UNMANAGED_INSTALL)."""
    where = f"download/{version}" if version else "latest/download"
    return f"""#!/bin/sh
# uv installer answered by composer2_jax's egress mirror (env/mirrors.py), not astral.sh's script: it installs
# uv {version or '(latest)'} from the release tarball, which the mirror serves from the `uv` wheel on the package index.
set -eu
case "$(uname -m)" in
  x86_64|amd64) arch=x86_64 ;;
  aarch64|arm64) arch=aarch64 ;;
  *) echo "uv installer: unsupported machine $(uname -m)" >&2; exit 1 ;;
esac
libc=gnu
if (ldd --version 2>&1 || true) | grep -qi musl; then libc=musl; fi
target="$arch-unknown-linux-$libc"
url="https://github.com/astral-sh/uv/releases/{where}/uv-$target.tar.gz"
home="${{HOME:-/root}}"
dest="${{UV_UNMANAGED_INSTALL:-${{UV_INSTALL_DIR:-${{XDG_BIN_HOME:-$home/.local/bin}}}}}}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "downloading uv {version or '(latest)'} $target" >&2
if command -v curl >/dev/null 2>&1; then
  curl -fsSL "$url" -o "$tmp/uv.tar.gz"
elif command -v wget >/dev/null 2>&1; then
  wget -q -O "$tmp/uv.tar.gz" "$url"
else
  echo "uv installer: need curl or wget" >&2; exit 1
fi
tar -xzf "$tmp/uv.tar.gz" -C "$tmp"
mkdir -p "$dest"
for b in uv uvx; do cp "$tmp/uv-$target/$b" "$dest/$b"; chmod 755 "$dest/$b"; done
cat > "$dest/env" <<EOF
#!/bin/sh
# add binaries to PATH if they aren't added yet
case ":\\${{PATH}}:" in
    *:"$dest":*) ;;
    *) export PATH="$dest:\\$PATH" ;;
esac
EOF
if [ -z "${{UV_NO_MODIFY_PATH:-}}${{INSTALLER_NO_MODIFY_PATH:-}}${{UV_UNMANAGED_INSTALL:-}}" ]; then
  for rc in "$home/.profile" "$home/.bashrc"; do
    grep -qs "$dest/env" "$rc" || echo ". \\"$dest/env\\"" >> "$rc"
  done
fi
echo "installing to $dest" >&2
echo "  uv" >&2
echo "  uvx" >&2
echo "everything's installed!" >&2
"""


BUILTINS = {"uv-installer": lambda fields: uv_installer(fields.get("version"))}
DEFAULT_MIRRORS = (
    MirrorRule("https://astral.sh/uv/install.sh", builtin="uv-installer", content_type="text/x-sh"),
    MirrorRule("https://astral.sh/uv/{version}/install.sh", builtin="uv-installer", content_type="text/x-sh"),
    MirrorRule("https://github.com/astral-sh/uv/releases/download/{version}/uv-{target}.tar.gz",
               pypi="uv=={version}", pack="scripts", content_type="application/gzip"),
    MirrorRule("https://github.com/astral-sh/uv/releases/latest/download/uv-{target}.tar.gz", pypi="uv",
               pack="scripts", content_type="application/gzip"),
)


def _fill(template: str, fields: dict[str, str]) -> str:
    """template with {field} replaced by the URL's values (unknown fields stay as written)."""
    return _FIELD.sub(lambda m: fields.get(m.group(1), m.group(0)), template)


class MirrorMap:
    """Ordered mirror rules (the first match answers) and the cache of artifacts fetched from registries."""

    def __init__(self, rules=DEFAULT_MIRRORS, cache_dir: str | os.PathLike | None = None, python: str | None = None):
        self.rules = tuple(rules)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else Path(tempfile.gettempdir()) / "composer2-mirror"
        self.python = python or sys.executable
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    @classmethod
    def configured(cls) -> MirrorMap:
        """The map of $COMPOSER2_MIRRORS (a JSON or TOML file, see from_dict), else the defaults; artifacts fetched
        from registries are cached in $COMPOSER2_MIRROR_CACHE (default: a folder under the temporary directory)."""
        cache = os.environ.get(CACHE_ENV) or None
        path = os.environ.get(MIRRORS_ENV)
        return cls.from_file(path, cache_dir=cache) if path else cls(cache_dir=cache)

    @classmethod
    def from_dict(cls, d: dict, extend_defaults: bool = True, **kw) -> MirrorMap:
        """{"mirrors": [rule, ...]} (each a MirrorRule's fields), after the defaults unless extend_defaults=False."""
        unknown = set(d) - {"mirrors", "defaults"}
        if unknown:
            raise ValueError(f"unknown mirror map keys {sorted(unknown)}; expected 'mirrors' (and 'defaults')")
        rules = tuple(MirrorRule(**r) for r in d.get("mirrors", ()))
        if d.get("defaults", extend_defaults):
            rules = rules + DEFAULT_MIRRORS
        return cls(rules, **kw)

    @classmethod
    def from_file(cls, path: str | os.PathLike, **kw) -> MirrorMap:
        """A mirror map from a JSON or TOML file (same shape as from_dict)."""
        text = Path(path).read_text()
        if str(path).endswith(".toml"):
            import tomllib

            return cls.from_dict(tomllib.loads(text), **kw)
        return cls.from_dict(json.loads(text), **kw)

    def to_dict(self) -> dict:
        """JSON-ready form (every rule, the defaults included)."""
        return {"mirrors": [r.to_dict() for r in self.rules], "defaults": False}

    def intercepts(self, host: str, port: int) -> bool:
        """True if some https pattern lives on host:port (its CONNECTs are terminated here)."""
        host = host.lower().rstrip(".")
        return any(r.host == (host, port, "https") for r in self.rules)

    def match(self, url: str) -> tuple[MirrorRule, dict[str, str]] | None:
        """The first rule matching url and its fields, or None."""
        for rule in self.rules:
            fields = rule.match(url)
            if fields is not None:
                return rule, fields
        return None

    def artifact(self, rule: MirrorRule, fields: dict[str, str]) -> Artifact:
        """What answers a match (fetching and caching a registry package the first time); MirrorError if it cannot."""
        ctype = rule.content_type or "application/octet-stream"
        if rule.text is not None:
            return Artifact(rule.content_type or "text/plain; charset=utf-8", "text", data=_fill(rule.text, fields)
                            .encode())
        if rule.builtin is not None:
            version = fields.get("version")
            return Artifact(ctype, f"builtin {rule.builtin}" + (f" {version}" if version else ""),
                            data=BUILTINS[rule.builtin](fields).encode())
        if rule.file is not None or rule.dir is not None:
            if rule.file is not None:
                path = _fill(rule.file, fields)
            else:
                path = os.path.join(rule.dir, fields[_FIELD.findall(rule.url)[-1]])
            if not os.path.isfile(path):
                raise MirrorError(f"mirror file {path} does not exist")
            return Artifact(ctype, f"file {path}", path=path)
        return self._pypi(rule, fields, ctype)

    def _pypi(self, rule: MirrorRule, fields: dict[str, str], ctype: str) -> Artifact:
        """A wheel from the host's package index (cached), or its scripts repacked as a tar.gz."""
        req = _fill(rule.pypi, fields)
        target = fields.get("target")
        if rule.platform is not None:
            platform = _fill(rule.platform, fields)
        elif target is not None:
            platform = TARGET_PLATFORMS.get(target)
            if platform is None:
                raise MirrorError(f"no wheel platform for target {target!r}; known: {sorted(TARGET_PLATFORMS)}")
        else:
            platform = None
        key = hashlib.sha256(json.dumps([req, platform, rule.pack, target]).encode()).hexdigest()[:24]
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        source = f"pypi {req}" + (f" ({platform})" if platform else "") + (" scripts" if rule.pack else "")
        with lock:
            done = self.cache_dir / key
            found = list(done.glob("*")) if done.is_dir() else []
            if not found:
                found = [self._fetch(req, platform, rule.pack, target, done)]
        return Artifact(ctype, source, path=str(found[0]))

    def _fetch(self, req: str, platform: str | None, pack: str | None, target: str | None, done: Path) -> Path:
        """pip download req (the host's own pip and index configuration), then the wheel or its scripts tarball."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="fetch-", dir=self.cache_dir))
        try:
            argv = ([self.python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                     "--disable-pip-version-check", "-q", "-d", str(work / "dl")]
                    + (["--platform", platform] if platform else []) + ["--", req])  # a field is never an option
            try:
                r = subprocess.run(argv, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise MirrorError(f"pip download {req} ran past {FETCH_TIMEOUT_S} s") from None
            wheels = sorted((work / "dl").glob("*.whl"))
            if r.returncode != 0 or not wheels:
                raise MirrorError(f"pip download {req}{' --platform ' + platform if platform else ''} failed "
                                  f"(exit {r.returncode}): {(r.stdout + r.stderr).strip()[-400:]}")
            wheel = wheels[0]
            out = work / "out"
            out.mkdir()
            if pack is None:
                result = out / wheel.name
                shutil.move(str(wheel), result)
            else:
                name = wheel.name.split("-")[0]
                folder = f"{name}-{target}" if target else name
                result = out / f"{folder}.tar.gz"
                _scripts_tarball(wheel, folder, result)
            done.parent.mkdir(parents=True, exist_ok=True)
            os.replace(out, done)
            return done / result.name
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _scripts_tarball(wheel: Path, folder: str, dest: Path) -> None:
    """The wheel's *.data/scripts/ files as folder/<name> in a tar.gz (executable, owner 0)."""
    with zipfile.ZipFile(wheel) as z, tarfile.open(dest, "w:gz") as tf:
        members = [i for i in z.infolist() if re.match(r"[^/]+\.data/scripts/[^/]+\Z", i.filename)]
        if not members:
            raise MirrorError(f"{wheel.name} has no scripts (*.data/scripts/) to pack")
        for info in members:
            ti = tarfile.TarInfo(f"{folder}/{info.filename.rsplit('/', 1)[1]}")
            ti.size, ti.mode, ti.mtime = info.file_size, 0o755, 0
            with z.open(info) as f:
                tf.addfile(ti, f)
