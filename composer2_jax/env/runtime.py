"""Host-side machinery shared by every sandbox of one Environment: dirs, layers, mounts, egress, cgroups."""

from __future__ import annotations

import glob
import os
import shutil
import stat
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

from composer2_jax.env.cgroups import Cgroups
from composer2_jax.env.egress import EgressProxy
from composer2_jax.env.layers import LayerStore
from composer2_jax.env.mounts import MountHelper
from composer2_jax.env.sandbox_config import SandboxConfig, SandboxLimits

GUEST_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guest")


def check_host() -> None:
    """Raise a clear error when this host cannot run sandboxes (not root, no bwrap, no user namespaces)."""
    if os.geteuid() != 0:
        raise PermissionError(f"the sandbox environment runs as root (it mounts overlays); euid is {os.geteuid()}")
    SandboxConfig().bwrap_path()
    SandboxConfig().setpriv_path()
    try:
        with open("/proc/sys/user/max_user_namespaces") as f:
            if int(f.read()) == 0:
                raise OSError("user.max_user_namespaces is 0; expected user namespaces to be enabled")
    except FileNotFoundError:
        raise OSError("/proc/sys/user/max_user_namespaces is missing; expected a kernel with user namespaces") from None


def host_problem() -> str | None:
    """Why this host cannot run sandboxes (the message of `check_host`), or None if it can."""
    try:
        check_host()
    except (OSError, PermissionError) as e:
        return str(e)
    return None


def _check_searchable(path: str, uid: int, gid: int) -> None:
    """Every ancestor of path must be searchable by the sandbox's host uid (bwrap binds from there)."""
    current = os.path.abspath(path)
    while True:
        st = os.stat(current)
        ok = st.st_mode & stat.S_IXOTH or (st.st_uid == uid and st.st_mode & stat.S_IXUSR) or (
            st.st_gid == gid and st.st_mode & stat.S_IXGRP)
        if not ok:
            raise PermissionError(f"{current!r} (mode {oct(st.st_mode & 0o777)}) is not searchable by host uid {uid}; "
                                  "SandboxConfig.public_dir must be reachable by the sandbox user "
                                  f"(e.g. chmod o+x {current})")
        if current == "/":
            return
        current = os.path.dirname(current)


class Runtime:
    """Owns the base dir and the shared services; `close` tears all of them down."""

    def __init__(self, config: SandboxConfig, limits: SandboxLimits):
        check_host()
        self.config, self.limits = config, limits
        self.owns_base = config.base_dir is None
        self.base = os.path.realpath(config.base_dir or tempfile.mkdtemp(prefix="composer2-env-"))
        if any(c in self.base for c in ":,"):
            raise ValueError(f"base dir {self.base!r} contains ':' or ','; overlay options cannot name it")
        os.makedirs(self.base, mode=0o700, exist_ok=True)
        # bwrap runs as the unprivileged sandbox uid and must reach the guest scripts and egress sockets, so they
        # live in a small public dir (searchable, not listable) while layers and logs stay root-only in base.
        self.public = tempfile.mkdtemp(prefix="composer2-env-pub-", dir=config.public_dir)
        os.chmod(self.public, 0o711)
        _check_searchable(self.public, config.host_uid, config.host_gid)
        self.guest_dir = self._install_guest()
        self.egress_dir = self._subdir(self.public, "egress", 0o711)
        self.log_dir = self._subdir(self.base, "logs", 0o700)
        self.layers = LayerStore(os.path.join(self.base, "layers"), config.host_uid, config.host_gid)
        self.mountd = MountHelper()
        self.proxy = EgressProxy()
        self.cgroups = Cgroups()
        # bwrap dies with the *thread* that started it (PR_SET_PDEATHSIG), so all spawns use this one thread.
        self.spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")
        self._image_roots: dict[str, str] = {}  # exported image layer id -> the directory holding it

    def add_image(self, layers, layer_root: str, uid_base: int) -> None:
        """Register an image's exported layers (they stay where its ImageBuilder put them)."""
        root = os.path.realpath(layer_root)
        if uid_base != self.config.image_uid_base:
            raise ValueError(f"image layers at {root} are shifted by uid {uid_base}, but SandboxConfig."
                             f"image_uid_base={self.config.image_uid_base}; build with ImageBuilder(uid_base=...) "
                             "matching the environment")
        if any(c in root for c in ":,"):
            raise ValueError(f"image layer root {root!r} contains ':' or ','; overlay options cannot name it")
        for layer in layers:
            self._image_roots[layer] = root

    def image_dirs(self, chain) -> tuple[list[str], dict[str, int]]:
        """(the layer roots a chain's image layers live in, layer id -> index into them)."""
        roots, index = [], {}
        for layer in chain:
            if layer.startswith("I"):
                root = self._image_roots[layer]
                if root not in roots:
                    roots.append(root)
                index[layer] = roots.index(root)
        return roots, index

    @staticmethod
    def _subdir(parent: str, name: str, mode: int) -> str:
        """Create parent/name with the given mode."""
        path = os.path.join(parent, name)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
        return path

    def _install_guest(self) -> str:
        """Copy the guest scripts (env/guest) where the sandbox user can read them, byte-compiled by the sandbox's
        python."""
        dest = self._subdir(self.public, "guest", 0o755)
        for src in glob.glob(os.path.join(GUEST_SRC, "*.py")):
            target = os.path.join(dest, os.path.basename(src))
            shutil.copyfile(src, target)
            os.chmod(target, 0o644)
        subprocess.run([self.config.python_path(), "-I", "-m", "compileall", "-q", dest], check=True,
                       capture_output=True)  # the bind is read-only: without this every start recompiles
        return dest

    def close(self) -> None:
        """Stop the shared services and remove the base dir if we created it."""
        self.spawner.shutdown(wait=True, cancel_futures=True)
        self.proxy.close()
        self.mountd.close()
        self.cgroups.close()
        shutil.rmtree(self.public, ignore_errors=True)
        if self.owns_base:
            shutil.rmtree(self.base, ignore_errors=True)
