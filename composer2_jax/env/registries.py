"""The package registries this host is configured for (pip, apt, npm), read from the host's own configuration.

The verifier phase may reach these (verify/network.py), whatever the task lets its agent reach. Nothing here names
a host: pip's indexes come from `pip config list` (files and PIP_* variables) with pip's own default index when none
replaces it; apt's from /etc/apt/sources.list and the enabled entries of /etc/apt/sources.list.d (one-line and deb822
forms); npm's from `npm config get registry` when npm is installed. Local indexes (file://, paths) are not hosts and
are not carried into sandboxes.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import os
import shlex
import shutil
import subprocess
import sys
from urllib.parse import urlsplit

from composer2_jax.env.egress_policy import EgressPolicy

APT_SOURCES = "/etc/apt/sources.list"


@dataclasses.dataclass(frozen=True)
class Registries:
    """Where this host installs packages from."""

    pip_index: str | None = None  # index-url when the configuration replaces pip's default
    pip_extra: tuple[str, ...] = ()  # extra-index-url entries that are network URLs
    pip_hosts: tuple[str, ...] = ()  # hosts pip reaches (the indexes', and pip's file host for its default index)
    apt_uris: tuple[str, ...] = ()  # network URIs of the enabled apt sources
    npm_registry: str | None = None

    @property
    def urls(self) -> tuple[str, ...]:
        """Every network URL above."""
        return tuple(u for u in (self.pip_index, *self.pip_extra, *self.apt_uris, self.npm_registry) if u)

    def hosts(self) -> tuple[str, ...]:
        """The host names, sorted."""
        names = set(self.pip_hosts) | {urlsplit(u).hostname.lower() for u in self.urls if urlsplit(u).hostname}
        return tuple(sorted(names))

    def ports(self) -> tuple[int, ...]:
        """The ports (80 and 443 always: indexes redirect between schemes)."""
        ports = {80, 443}
        for u in self.urls:
            try:
                port = urlsplit(u).port
            except ValueError:
                continue
            if port:
                ports.add(port)
        return tuple(sorted(ports))

    def policy(self) -> EgressPolicy:
        """An EgressPolicy reaching exactly these registries (GET, HEAD and CONNECT tunnels)."""
        return EgressPolicy(allow_hosts=self.hosts(), allow_ports=self.ports(),
                            allow_methods=("GET", "HEAD", "CONNECT"))


def _network(url: str) -> bool:
    """True for http(s) URLs with a host."""
    s = urlsplit(url)
    return s.scheme in ("http", "https") and bool(s.hostname)


def pip_config(python: str | None = None) -> dict[str, str]:
    """`pip config list` as {key: value} (keys like global.index-url, :env:.extra-index-url)."""
    try:
        r = subprocess.run([python or sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                           timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out = {}
    for line in r.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            try:
                parts = shlex.split(value)
            except ValueError:
                parts = [value]
            out[key.strip()] = " ".join(parts)
    return out


def _pip_default() -> tuple[str | None, str | None]:
    """(pip's default index URL, the host its files come from), from pip itself."""
    try:
        from pip._internal.models.index import PyPI
    except ImportError:
        return None, None
    return PyPI.simple_url, PyPI.file_storage_domain


def _pip(config: dict[str, str]) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """(index-url if replaced, network extra indexes, hosts) from pip's configuration; env wins over files."""
    def pick(name):
        for scope in (":env:", "install", "download", "global", "user", "site"):
            if f"{scope}.{name}" in config:
                return config[f"{scope}.{name}"]
        return None

    index = pick("index-url")
    extra = tuple(u for u in (pick("extra-index-url") or "").split() if _network(u))
    default_url, default_files = _pip_default()
    hosts = set()
    if index is None or index.rstrip("/") == (default_url or "").rstrip("/"):
        if default_url:
            hosts.add(urlsplit(default_url).hostname)
        if default_files:
            hosts.add(default_files)
    for u in (index, *extra):
        if u and _network(u):
            hosts.add(urlsplit(u).hostname.lower())
    return (index if index and _network(index) else None), extra, tuple(sorted(hosts))


def apt_uris(root: str = "/") -> tuple[str, ...]:
    """Network URIs of the enabled apt sources under root (sources.list, *.list and *.sources)."""
    base = os.path.join(root, APT_SOURCES.lstrip("/"))
    uris: list[str] = []
    for path in [base] + sorted(glob.glob(base + ".d/*.list")):
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        for line in lines:
            text = line.split("#", 1)[0]
            if "[" in text:  # deb [arch=amd64 signed-by=...] URI suite components
                before, _, after = text.partition("[")
                text = before + after.partition("]")[2]
            words = text.split()
            if len(words) > 1 and words[0] in ("deb", "deb-src") and _network(words[1]):
                uris.append(words[1])
    for path in sorted(glob.glob(base + ".d/*.sources")):
        try:
            stanzas = open(path).read().split("\n\n")
        except OSError:
            continue
        for stanza in stanzas:
            fields = {}
            for line in stanza.splitlines():
                if line.strip().startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.strip()
            if fields.get("enabled", "yes").lower() == "no":
                continue
            uris.extend(u for u in fields.get("uris", "").split() if _network(u))
    return tuple(dict.fromkeys(uris))


def npm_registry() -> str | None:
    """npm's configured registry, if npm is installed."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        r = subprocess.run([npm, "config", "get", "registry"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    url = r.stdout.strip()
    return url if r.returncode == 0 and _network(url) else None


@functools.lru_cache(maxsize=1)
def host_registries() -> Registries:
    """The registries of this host's pip, apt and npm configuration (read once per process)."""
    index, extra, hosts = _pip(pip_config())
    return Registries(index, extra, hosts, apt_uris(), npm_registry())
