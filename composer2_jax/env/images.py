"""Images for sandboxes: Dockerfiles built with podman on locally bootstrapped bases, cached by content, and exported
as uid-shifted overlay layers that image sandboxes stack under their own copy-on-write layer.

    builder = ImageBuilder()                              # cache: $COMPOSER2_IMAGE_CACHE or /var/cache/composer2/images
    image = builder.build("task/environment")             # Image(key, layers, config, mappings, log, cached)
    snap = env.import_image(image); sid = env.fork(snap)  # composer2_jax.env.Environment

`build(context, dockerfile)`:
1. Parse the Dockerfile (`dockerfile.parse`) and map every external image it reads (each FROM, each
   COPY --from=<image>) through the base-image table (`base_images.map_base`). An unmappable one is
   `UnsupportedImage` with the reason, before any work is done.
2. Key = sha256 of the builder version, the rewritten Dockerfile (its FROM lines name local bases whose tags carry
   their own keys), the build args and every file of the context (path, type, mode, bytes or link target).
3. If builds/<key>.json and its exported layers exist, that is the Image: no podman, no subprocess at all.
4. Otherwise, under a per-key file lock: make the bases (debootstrap --variant=minbase of the Debian release,
   the host's extra CA certificates added, `podman import`; then the recipe's own Dockerfile), then
   `podman build` the rewritten Dockerfile (RUN steps: below). Every networked step runs in `buildnet.py`: a
   fresh network namespace whose only way out is this builder's EgressProxy, so builds reach the package
   registries of `REGISTRY_POLICY` and nothing else, and the log lists every request.
5. Export: each podman layer's diff directory is copied once (cp -a keeps overlay whiteouts, opaque-dir xattrs,
   hard links and device nodes) into layers/<uid_base>/<layer> with every owner shifted by uid_base, so image uid 0
   is host uid uid_base: the id range an image sandbox's user namespace maps (SandboxConfig.image_uid_base).
   Layers are shared by every image built on them; a fork of an image sandbox copies nothing.

RUN steps (a Dockerfile is a stranger's code): `podman build --isolation oci --runtime <buildrt.py> --network host
--userns-uid-map 0:B:65536` (B = BuildIsolation.uid_base, 300000 by default, disjoint from the sandboxes' range).
Each step is a runc container in its own user namespace (root inside is host uid B: no host uid 0, no file of
host root's reachable), pivot_root'ed into the step's root (a chroot escape lands in the image), with podman's
seccomp profile and Docker's default capabilities, and shares buildnet's network namespace (the egress proxy is
its only way out). buildrt.py refuses a step spec whose id maps reach host ids below B, sets no_new_privs and the
sandbox limits (memory and pids cgroups, open files, file size: `SandboxLimits`), and shifts the step's written
ids back to image ids before podman commits the layer (the layers of COPY, ADD and WORKDIR keep host ids B + n:
the export shifts them, `shift_ownership`). crun is not used (it refuses cgroups in hybrid mode);
`podman run` is not used: sandboxes run the layers with bubblewrap. Debootstrap and its chrooted steps still run
as host root: they run Debian's own packages from the policy's mirror, no task code. Image metadata (ENV,
ENTRYPOINT, CMD, WORKDIR, USER) comes from `podman image inspect`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import glob
import hashlib
import itertools
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from composer2_jax.env import base_images, dockerfile
from composer2_jax.env.egress import EgressProxy
from composer2_jax.env.egress_policy import EgressPolicy
from composer2_jax.env.sandbox_config import SandboxLimits

BUILDER_VERSION = 3  # part of every key: bump when a change of this module changes what a build produces
# (2: build-host facts scrubbed from debootstrapped roots, see scrub_host_facts; 3: RUN steps in a user namespace)
CACHE_ENV = "COMPOSER2_IMAGE_CACHE"
# What a command chrooted into a freshly bootstrapped root runs with: nothing of the build host's environment (a host
# TMPDIR, say, names a directory the root does not have: update-ca-certificates' mktemp failed on it)
CHROOT_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
              "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"}
DEFAULT_CACHE = "/var/cache/composer2/images"
ID_RANGE = 65536  # ids an image may use (0..65535), all shifted by uid_base
REGISTRY_HOSTS = (
    "deb.debian.org", "security.debian.org", "*.debian.org", "archive.ubuntu.com", "security.ubuntu.com",
    "pypi.org", "files.pythonhosted.org", "*.pythonhosted.org", "registry.npmjs.org", "registry.yarnpkg.com",
    "proxy.golang.org", "sum.golang.org", "crates.io", "index.crates.io", "static.crates.io",
    "repo.maven.apache.org", "repo1.maven.org", "rubygems.org", "cran.r-project.org", "conda.anaconda.org",
    "repo.anaconda.com")
REGISTRY_POLICY = EgressPolicy(allow_hosts=REGISTRY_HOSTS, allow_ports=(80, 443),
                               allow_methods=("GET", "HEAD", "CONNECT"))
BUILDNET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "buildnet.py")
BUILDRT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "buildrt.py")
LOCAL_PREFIX = "localhost/composer2"


def build_env() -> dict:
    """podman build's environment: this process's, with TMPDIR=/var/tmp (buildah puts each RUN step's bundle there,
    and runc, as the step's unprivileged root, must be able to reach it: a host TMPDIR under a 0700 dir it cannot)."""
    return {**os.environ, "TMPDIR": "/var/tmp"}


class UnsupportedImage(ValueError):
    """The Dockerfile needs something this builder cannot provide (an unmappable base); the message says what."""


class ImageError(RuntimeError):
    """A build step failed; the message ends with the tail of the build log."""


@dataclasses.dataclass(frozen=True)
class ImageConfig:
    """The image metadata a sandbox honours (Docker's image config)."""

    env: tuple[tuple[str, str], ...] = ()  # ENV, in order
    entrypoint: tuple[str, ...] = ()  # ENTRYPOINT (exec form)
    cmd: tuple[str, ...] = ()  # CMD (exec form)
    workdir: str = ""  # WORKDIR ("" when the Dockerfile sets none)
    user: str = ""  # USER ("" = root)

    @classmethod
    def from_inspect(cls, config: Mapping) -> ImageConfig:
        """From `podman image inspect`'s Config object."""
        env = tuple(tuple(e.split("=", 1)) if "=" in e else (e, "") for e in config.get("Env") or ())
        return cls(env, tuple(config.get("Entrypoint") or ()), tuple(config.get("Cmd") or ()),
                   config.get("WorkingDir") or "", config.get("User") or "")

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> ImageConfig:
        """Inverse of to_dict."""
        return cls(tuple(tuple(p) for p in d["env"]), tuple(d["entrypoint"]), tuple(d["cmd"]), d["workdir"], d["user"])


@dataclasses.dataclass(frozen=True)
class BuildIsolation:
    """How the RUN steps of a build are confined (see the module docstring, "RUN steps")."""

    uid_base: int = 300_000  # host uid of a RUN step's root: the build's user namespace maps 0..65535 here
    runc: str = "runc"  # the OCI runtime buildrt.py hands each checked, tightened step spec to
    limits: SandboxLimits = SandboxLimits()  # sandbox_memory_bytes, processes, open_files, file_size_bytes apply

    def __post_init__(self):
        if self.uid_base < ID_RANGE or self.uid_base + ID_RANGE > 1 << 31:
            raise ValueError(f"BuildIsolation.uid_base={self.uid_base}; expected a host uid >= {ID_RANGE} with "
                             f"{ID_RANGE} ids above it free")

    def policy(self) -> dict:
        """What buildrt.py enforces on each step's spec."""
        lim = self.limits
        return {"min_host_id": self.uid_base, "memory_bytes": lim.sandbox_memory_bytes, "pids": lim.processes,
                "open_files": lim.open_files, "file_size_bytes": lim.file_size_bytes}


@dataclasses.dataclass(frozen=True)
class Debootstrap:
    """How a Debian release under the base images is bootstrapped (these inputs are part of its key)."""

    mirror: str = "http://deb.debian.org/debian"  # the Debian mirror debootstrap downloads the release from
    ca_dir: str | None = "/usr/local/share/ca-certificates"  # its *.crt are added to the release's CAs (None: none)
    program: str = "debootstrap"  # the debootstrap executable


@dataclasses.dataclass(frozen=True)
class Image:
    """A built image, ready for `Environment.import_image`."""

    key: str  # content hash of the build inputs (also the podman tag)
    name: str  # podman image name
    layers: tuple[str, ...]  # exported layer ids, top first (directories under layer_root)
    layer_root: str  # where the exported, uid-shifted layers live
    uid_base: int  # host uid of the image's uid 0 (the layers' owners are shifted by it)
    config: ImageConfig
    mappings: tuple[str, ...]  # how each public base was reproduced ("ubuntu:24.04 → Debian bookworm ...")
    log: str  # path of the build log
    cached: bool = False  # True when this call found everything built and ran nothing


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """What a build will do, decided without running anything."""

    key: str
    dockerfile: str  # the rewritten Dockerfile text
    bases: tuple[tuple[str, base_images.BaseRecipe], ...]  # (public reference, recipe) per distinct external image
    context: str
    build_args: tuple[tuple[str, str], ...]


def default_cache_dir() -> str:
    """$COMPOSER2_IMAGE_CACHE, or /var/cache/composer2/images."""
    return os.environ.get(CACHE_ENV) or DEFAULT_CACHE


def context_digest(context: str | os.PathLike) -> str:
    """sha256 over every entry of a build context: relative path, type, permission bits, bytes or link target."""
    h = hashlib.sha256()
    root = Path(context)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(root)).encode()
            h.update(rel + b"\0" + f"{stat.S_IFMT(st.st_mode)}:{stat.S_IMODE(st.st_mode)}".encode() + b"\0")
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(path).encode() + b"\0")
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                h.update(b"\0")
    return h.hexdigest()


def shift_ownership(top: str, base: int, build_base: int | None = None) -> None:
    """Add `base` to the owner and group of every entry under top (no symlink followed); setuid/setgid bits kept.

    Ids in build_base..build_base+65535 (what podman's COPY, ADD and WORKDIR steps wrote as the build's user
    namespace's ids, see BuildIsolation) are image ids shifted by build_base: they are shifted back first. Any
    other id outside 0..65535 cannot be mapped into the sandbox's user namespace and is an error naming the path.
    Hard-linked inodes are shifted once.
    """
    walk = ((dirpath, dirnames + filenames) for dirpath, dirnames, filenames in os.walk(top))
    seen: set[tuple[int, int]] = set()

    def image_id(i: int) -> int:
        return i - build_base if build_base is not None and build_base <= i < build_base + ID_RANGE else i

    for path in itertools.chain([top], (os.path.join(d, n) for d, names in walk for n in names)):
        st = os.lstat(path)
        if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        uid, gid = image_id(st.st_uid), image_id(st.st_gid)
        if uid >= ID_RANGE or gid >= ID_RANGE:
            raise ImageError(f"{path} is owned by {st.st_uid}:{st.st_gid}; image ids must be below {ID_RANGE}")
        os.lchown(path, uid + base, gid + base)
        if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            os.chmod(path, stat.S_IMODE(st.st_mode))  # chown cleared them


# What a container runtime provides at run time and debootstrap copies from the build host into the new root.
NEUTRAL_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


def scrub_host_facts(root: str | os.PathLike) -> None:
    """Remove the build host's identity from a debootstrapped root: debootstrap copies the host's /etc/resolv.conf
    and /etc/hostname (and a hosts file or machine id may come along). resolv.conf is left empty (sandboxes have no
    DNS; their egress goes through the proxy), hostname is "localhost", hosts names localhost only, and machine-id
    files are emptied (systemd's "uninitialized"), as in Docker's Debian images."""
    root = Path(root)
    etc = root / "etc"
    for name, text in (("resolv.conf", ""), ("hostname", "localhost\n"), ("hosts", NEUTRAL_HOSTS)):
        path = etc / name
        if path.is_symlink() or path.exists():
            path.unlink()
        path.write_text(text)
        os.chmod(path, 0o644)
    for rel in ("etc/machine-id", "var/lib/dbus/machine-id"):
        path = root / rel
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            path.write_text("")


@contextlib.contextmanager
def file_lock(path: str):
    """An exclusive flock on path for the duration of the block (other processes building the same key wait)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _free_port() -> int:
    """A TCP port number (the build's relay listens on it inside its own network namespace, so any number works)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: str, size: int = 3000) -> str:
    """The last bytes of a log file."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            return f.read().decode(errors="replace")
    except OSError:
        return "(no log)"


class ImageBuilder:
    """Builds, caches and exports images (see the module docstring). Thread-safe and process-safe per key."""

    def __init__(self, cache_dir: str | os.PathLike | None = None, policy: EgressPolicy = REGISTRY_POLICY,
                 uid_base: int = 200_000, bootstrap: Debootstrap = Debootstrap(), podman: str = "podman",
                 timeout_s: float = 1800.0, isolation: BuildIsolation = BuildIsolation()):
        self.cache = os.path.realpath(cache_dir or default_cache_dir())
        if any(c in self.cache for c in ":,"):
            raise ValueError(f"image cache {self.cache!r} contains ':' or ','; overlay options cannot name it")
        if uid_base <= 0 or uid_base + ID_RANGE > 1 << 31:
            raise ValueError(f"uid_base={uid_base}; expected a positive host uid with {ID_RANGE} ids above it free")
        self.policy, self.uid_base, self.bootstrap = policy, uid_base, bootstrap
        self.podman, self.timeout_s = podman, timeout_s
        if uid_base <= isolation.uid_base < uid_base + ID_RANGE or isolation.uid_base <= uid_base < \
                isolation.uid_base + ID_RANGE:
            raise ValueError(f"build uid base {isolation.uid_base} overlaps the sandboxes' id range at {uid_base}")
        self.isolation = isolation
        self.layer_root = os.path.join(self.cache, "layers", str(uid_base))
        for sub in ("builds", "logs", "locks", "work"):
            os.makedirs(os.path.join(self.cache, sub), mode=0o700, exist_ok=True)
        os.makedirs(self.layer_root, mode=0o700, exist_ok=True)
        self._proxy: EgressProxy | None = None

    # ------------------------------------------------------------------------------------------------ planning

    def base_name(self, recipe: base_images.BaseRecipe) -> str:
        """The podman name of a base recipe's image (its tag is the recipe's key)."""
        key = self._hash("base", self._debootstrap_key(recipe.suite), recipe.dockerfile("DEBOOTSTRAP"))
        return f"{LOCAL_PREFIX}/base-{recipe.suite}:{key[:20]}"

    def debootstrap_name(self, suite: str) -> str:
        """The podman name of a debootstrapped Debian release (its tag is the release's key)."""
        return f"{LOCAL_PREFIX}/debootstrap-{suite}:{self._debootstrap_key(suite)[:20]}"

    def _debootstrap_key(self, suite: str) -> str:
        """Key of a debootstrapped Debian release (suite, mirror, the CA certificates added)."""
        return self._hash("debootstrap", suite, self.bootstrap.mirror, *[Path(c).read_text() for c in self._certs()])

    def _certs(self) -> list[str]:
        """The CA certificates added to a debootstrapped release (sorted paths)."""
        ca_dir = self.bootstrap.ca_dir
        return sorted(glob.glob(os.path.join(ca_dir, "*.crt"))) if ca_dir else []

    @staticmethod
    def _hash(*parts: str) -> str:
        """sha256 of the builder version and some strings."""
        h = hashlib.sha256(f"composer2-images-v{BUILDER_VERSION}".encode())
        for part in parts:
            h.update(b"\0" + part.encode())
        return h.hexdigest()

    def plan(self, context: str | os.PathLike, dockerfile_name: str = "Dockerfile",
             build_args: Mapping[str, str] | None = None) -> BuildPlan:
        """Parse and map a build without running anything; UnsupportedImage if a base cannot be reproduced."""
        context = os.path.realpath(context)
        path = os.path.join(context, dockerfile_name)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no Dockerfile at {path}")
        try:
            parsed = dockerfile.parse(Path(path).read_text(), build_args, name=path)
        except dockerfile.DockerfileError as e:
            raise UnsupportedImage(str(e)) from None
        bases: dict[str, base_images.BaseRecipe] = {}
        for use in parsed.uses:
            try:
                bases[use.ref] = base_images.map_base(use.ref)
            except base_images.UnsupportedBase as e:
                raise UnsupportedImage(f"{path}: {e}") from None
        text = dockerfile.rewrite(parsed, lambda ref: self.base_name(bases[ref]))
        args = tuple(sorted((build_args or {}).items()))
        key = self._hash("task", text, json.dumps(args), context_digest(context))
        return BuildPlan(key, text, tuple(bases.items()), context, args)

    # ------------------------------------------------------------------------------------------------ building

    def build(self, context: str | os.PathLike, dockerfile_name: str = "Dockerfile",
              build_args: Mapping[str, str] | None = None, timeout_s: float | None = None) -> Image:
        """The image of a build context (cached by content; see the module docstring).

        timeout_s bounds the task's own `podman build` (Harbor's build_timeout_sec; default: the builder's); the
        bases it needs are built under the builder's timeout.
        """
        plan = self.plan(context, dockerfile_name, build_args)
        image = self._load(plan.key, cached=True)
        if image is not None:
            return image
        with file_lock(os.path.join(self.cache, "locks", f"{plan.key}.lock")):
            image = self._load(plan.key, cached=True)
            if image is not None:
                return image
            log = os.path.join(self.cache, "logs", f"{plan.key}.log")
            with open(log, "w") as f:
                f.write("".join(f"base {base_images.describe(ref, r)}\n" for ref, r in plan.bases))
            for _, recipe in plan.bases:
                self._ensure_base(recipe, log)
            name = f"{LOCAL_PREFIX}/task:{plan.key[:32]}"
            with tempfile.NamedTemporaryFile("w", suffix=".Dockerfile", dir=os.path.join(self.cache, "work"),
                                             delete=False) as df:
                df.write(plan.dockerfile)
            try:
                argv = [*self._podman_build(), "-f", df.name, "-t", name,
                        *[f"--build-arg={k}={v}" for k, v in plan.build_args], plan.context]
                self._run_networked(argv, log, f"podman build of {plan.context}", timeout_s, build_env())
            finally:
                os.unlink(df.name)
            mappings = tuple(base_images.describe(ref, r) for ref, r in plan.bases)
            return self._export(plan.key, name, mappings, log)

    def _ensure_base(self, recipe: base_images.BaseRecipe, log: str) -> str:
        """Build (once) the podman image of a base recipe; its name."""
        name = self.base_name(recipe)
        with file_lock(os.path.join(self.cache, "locks", f"{name.rsplit(':', 1)[1]}.lock")):
            if self._podman_has(name):
                return name
            root = self._ensure_debootstrap(recipe.suite, log)
            work = tempfile.mkdtemp(prefix="base-", dir=os.path.join(self.cache, "work"))
            try:
                Path(work, "Dockerfile").write_text(recipe.dockerfile(root))
                argv = [*self._podman_build(), "-t", name, work]
                self._run_networked(argv, log, f"building base {name}", env=build_env())
            finally:
                shutil.rmtree(work, ignore_errors=True)
        return name

    def _ensure_debootstrap(self, suite: str, log: str) -> str:
        """Debootstrap a Debian release (minbase + ca-certificates + host CA certificates) into podman, once."""
        name = self.debootstrap_name(suite)
        if self._podman_has(name):
            return name
        work = tempfile.mkdtemp(prefix=f"debootstrap-{suite}-", dir=os.path.join(self.cache, "work"))
        root = os.path.join(work, "root")
        try:
            self._run_networked([self.bootstrap.program, "--variant=minbase", "--include=ca-certificates", suite,
                                 root, self.bootstrap.mirror], log, f"debootstrap {suite}")
            certs = self._certs()
            for cert in certs:
                shutil.copy(cert, os.path.join(root, "usr/local/share/ca-certificates", os.path.basename(cert)))
            steps = (["chroot", root, "update-ca-certificates"], ["chroot", root, "apt-get", "clean"])
            for argv in steps if certs else steps[1:]:  # the root's own environment, none of the build host's
                self._run(argv, log, f"{' '.join(argv[2:])} in the new {suite} root", env=CHROOT_ENV)
            for junk in glob.glob(os.path.join(root, "var/lib/apt/lists/*")):
                if os.path.isfile(junk):
                    os.unlink(junk)
            scrub_host_facts(root)
            tar = subprocess.Popen(["tar", "-C", root, "--numeric-owner", "-cf", "-", "."], stdout=subprocess.PIPE)
            try:
                self._run([self.podman, "import", "-", name], log, f"podman import of {suite}", stdin=tar.stdout)
            finally:
                tar.stdout.close()
                tar.wait()
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return name

    # ------------------------------------------------------------------------------------------------ running

    def _podman_build(self) -> list[str]:
        """`podman build` with every RUN step in a user namespace, checked and tightened by buildrt.py (see the
        module docstring); the step shares buildnet's network namespace, whose only way out is the egress proxy."""
        runc = shutil.which(self.isolation.runc)
        if runc is None:
            raise ImageError(f"the OCI runtime {self.isolation.runc!r} is not installed (Debian: apt-get install -y "
                             "runc)")
        policy = json.dumps(self.isolation.policy(), sort_keys=True)
        script = (f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -I -S {shlex.quote(BUILDRT)} {shlex.quote(runc)}"
                  f" {shlex.quote(policy)} -- \"$@\"\n")
        path = os.path.join(self.cache, "work", f"buildrt-{hashlib.sha256(script.encode()).hexdigest()[:16]}.sh")
        if not os.path.exists(path):
            tmp = f"{path}.{secrets.token_hex(4)}"
            Path(tmp).write_text(script)
            os.chmod(tmp, 0o755)
            os.replace(tmp, path)
        ids = f"0:{self.isolation.uid_base}:{ID_RANGE}"
        return [self.podman, "build", "--isolation", "oci", "--runtime", path, "--network", "host",
                f"--userns-uid-map={ids}", f"--userns-gid-map={ids}", "--pull=never", "--layers"]

    def _egress(self) -> EgressProxy:
        """The builder's egress proxy (started on first use)."""
        if self._proxy is None:
            self._proxy = EgressProxy()
        return self._proxy

    def _run_networked(self, argv: list[str], log: str, what: str, timeout_s: float | None = None,
                       env: dict | None = None) -> None:
        """Run argv inside buildnet.py: a fresh network namespace reaching only the registry policy's hosts."""
        proxy, route = self._egress(), f"build-{secrets.token_hex(6)}"
        # In the system's temp dir, not the cache: a Unix socket's path must fit in 107 bytes, a cache path need not.
        sock_dir = tempfile.mkdtemp(prefix="c2-egress-")
        sock = os.path.join(sock_dir, "egress.sock")
        proxy.add(route, sock, self.policy, 0, 0)
        try:
            self._run([sys.executable, "-I", "-S", BUILDNET, sock, str(_free_port()), "--", *argv], log, what,
                      timeout_s=timeout_s, env=env)
        finally:
            events = proxy.log(route).events()
            proxy.remove(route)
            shutil.rmtree(sock_dir, ignore_errors=True)
            with open(log, "a") as f:
                denied = [e for e in events if not e["allowed"]]
                f.write(f"[egress] {len(events)} requests, {len(denied)} denied\n")
                f.writelines(f"[egress] {e['summary']}\n" for e in denied)

    def _run(self, argv: list[str], log: str, what: str, stdin=None, timeout_s: float | None = None,
             env: dict | None = None) -> None:
        """Run a build step with its output appended to the log (in `env`, else the builder's own environment);
        ImageError with the log's tail on failure."""
        timeout_s = timeout_s or self.timeout_s
        with open(log, "a") as f:
            f.write(f"$ {' '.join(argv)}\n")
            f.flush()
            start = time.monotonic()
            try:
                proc = subprocess.Popen(argv, stdin=stdin if stdin is not None else subprocess.DEVNULL, stdout=f,
                                        stderr=subprocess.STDOUT, start_new_session=True, env=env)
            except FileNotFoundError:
                raise ImageError(f"{what}: {argv[0]!r} is not installed (Debian: apt-get install -y podman runc "
                                 "debootstrap)") from None
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the step's whole session: buildnet, podman, RUN processes
                proc.wait()
                raise ImageError(f"{what} ran past {timeout_s:g} s; log {log}:\n{_tail(log)}") from None
            f.write(f"[{what}: exit {proc.returncode} after {time.monotonic() - start:.1f} s]\n")
        if proc.returncode != 0:
            raise ImageError(f"{what} failed with exit code {proc.returncode}; log {log}:\n{_tail(log)}")

    def _podman_has(self, name: str) -> bool:
        """True if podman's store has an image of this name."""
        return subprocess.run([self.podman, "image", "exists", name], capture_output=True, check=False).returncode == 0

    # ------------------------------------------------------------------------------------------------ exporting

    def _record_path(self, key: str) -> str:
        """Where a build's record (layers, config, mappings) is kept."""
        return os.path.join(self.cache, "builds", f"{key}.json")

    def _load(self, key: str, cached: bool) -> Image | None:
        """The Image of a finished build whose exported layers all exist, else None."""
        try:
            record = json.loads(Path(self._record_path(key)).read_text())
        except (OSError, ValueError):
            return None
        if not all(os.path.isdir(os.path.join(self.layer_root, layer)) for layer in record["layers"]):
            return None
        return Image(key, record["name"], tuple(record["layers"]), self.layer_root, self.uid_base,
                     ImageConfig.from_dict(record["config"]), tuple(record["mappings"]), record["log"], cached)

    def _export(self, key: str, name: str, mappings: tuple[str, ...], log: str) -> Image:
        """Export a podman image's layers (uid-shifted, once per layer) and write the build record."""
        out = subprocess.run([self.podman, "image", "inspect", name], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise ImageError(f"podman image inspect {name} failed: {out.stderr.strip()}")
        (info,) = json.loads(out.stdout)
        data = info["GraphDriver"]["Data"]
        diffs = [data["UpperDir"]] + [d for d in (data.get("LowerDir") or "").split(":") if d]
        layers = tuple(self._export_layer(diff) for diff in diffs)
        record = {"name": name, "layers": layers, "config": ImageConfig.from_inspect(info["Config"]).to_dict(),
                  "mappings": mappings, "log": log, "podman_id": info["Id"]}
        tmp = self._record_path(key) + ".tmp"
        Path(tmp).write_text(json.dumps(record, indent=1))
        os.rename(tmp, self._record_path(key))
        image = self._load(key, cached=False)
        assert image is not None
        return image

    def _export_layer(self, diff: str) -> str:
        """Copy one podman layer diff into the layer root with owners shifted by uid_base; its id."""
        layer = "I" + hashlib.sha256(os.path.basename(os.path.dirname(diff)).encode()).hexdigest()[:20]
        dest = os.path.join(self.layer_root, layer)
        if os.path.isdir(dest):
            return layer
        tmp = f"{dest}.tmp-{secrets.token_hex(4)}"
        os.mkdir(tmp, 0o755)
        try:
            cp = subprocess.run(["cp", "-a", "--no-dereference", f"{diff}/.", tmp], capture_output=True, check=False)
            if cp.returncode != 0:
                raise ImageError(f"copying layer {diff} failed: {cp.stderr.decode(errors='replace').strip()}")
            shift_ownership(tmp, self.uid_base, self.isolation.uid_base)
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return layer

    def close(self) -> None:
        """Stop the builder's egress proxy."""
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None
