"""The bubblewrap command line of one sandbox: namespaces, a read-only system, and the guest process as pid 1."""

from __future__ import annotations

import os

from composer2_jax.env.sandbox_config import SandboxConfig, SandboxLimits

GUEST_DIR = "/opt/sandbox-guest"  # where the guest scripts (env/guest) appear inside the sandbox
EGRESS_SOCKET = "/run/egress.sock"  # where the egress proxy's Unix socket appears inside the sandbox
WORKSPACE = "/workspace"
IMAGE_ROOT = "/.root"  # image sandboxes: where the image's root filesystem is mounted in the guest's view
# the host device nodes bwrap's --dev binds in: the mount helper remounts each read-only at start (mountd.seal);
# bwrap's --remount-ro /dev does not reach them and its --remount-ro would add nodev (no more /dev/null). Writing to
# a device still works on a read-only mount; chmod, chown and utime of the host's inode do not.
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def system_binds(config: SandboxConfig) -> list[str]:
    """Read-only binds of the host system dirs; host symlinks (merged /usr) are recreated as symlinks."""
    args: list[str] = []
    for path in config.system_dirs + config.extra_ro_binds:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path) or os.path.isfile(path):
            args += ["--ro-bind", path, path]
        elif path in config.extra_ro_binds:
            raise FileNotFoundError(f"extra_ro_binds entry {path!r} does not exist on the host")
    return args


def bwrap_argv(config: SandboxConfig, limits: SandboxLimits, guest_dir: str, egress_socket: str,
               rpc_fd: int, info_fd: int) -> list[str]:
    """Full argv: fresh user/pid/mount/ipc/uts/net namespaces, the guest as pid 1 talking on rpc_fd.

    bwrap starts as the unprivileged host_uid:host_gid with no supplementary groups through setpriv, not through
    Popen(user=, group=, extra_groups=): CPython forks instead of vforking when Popen changes ids, and a fork copies
    the page tables of the (large, many-threaded JAX) parent on every sandbox start and charges copy-on-write faults
    to its threads until the child execs — most of the system time of an RL run before this was changed.
    """
    drop = [config.setpriv_path(), f"--reuid={config.host_uid}", f"--regid={config.host_gid}", "--clear-groups",
            "--"]
    ns = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
          "--unshare-cgroup-try", "--uid", str(config.sandbox_uid), "--gid", str(config.sandbox_gid),
          "--disable-userns", "--hostname", config.hostname, "--die-with-parent", "--new-session", "--as-pid-1"]
    fs = system_binds(config) + [
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
        "--size", str(limits.tmp_bytes), "--tmpfs", "/dev/shm",
        "--ro-bind", guest_dir, GUEST_DIR,
        "--ro-bind", egress_socket, EGRESS_SOCKET,  # connect() works; chmod/chown/utime: EROFS
        "--dir", WORKSPACE, "--dir", "/.sbx",
        "--remount-ro", "/dev", "--remount-ro", "/",
        "--chdir", "/",
    ]
    env = ["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8"]
    guest = [config.python_path(), "-I", "-S", f"{GUEST_DIR}/main.py", str(rpc_fd), str(config.proxy_port),
             EGRESS_SOCKET]
    return [*drop, config.bwrap_path(), *ns, *fs, *env, "--info-fd", str(info_fd), "--", *guest]


def image_bwrap_argv(config: SandboxConfig, limits: SandboxLimits, guest_dir: str, egress_socket: str,
                     rpc_fd: int, info_fd: int, block_fd: int, net: tuple[str, int] | None = None) -> list[str]:
    """Argv of an image sandbox: the same namespaces, but root inside, with a 65536-id user namespace.

    bwrap starts as host uid image_uid_base and blocks on block_fd until the host has written the namespace's
    uid/gid maps (0..65535 -> image_uid_base..+65535; see Sandbox._map_ids), which a single `--uid` cannot express.
    Root inside gets Docker's default capabilities (config.image_caps), which only act on what the user namespace
    owns. The guest's own view is the host-rootfs layout (it runs the host's python); the image's root filesystem
    is mounted later at IMAGE_ROOT by mountd, and commands are chrooted into it.
    `net` = (network namespace path, relay port): join that namespace (env/netns.py) instead of a fresh one.
    """
    base = config.image_uid_base
    drop = [config.setpriv_path(), f"--reuid={base}", f"--regid={base}", "--clear-groups", "--"]
    if net is not None:
        drop = ["nsenter", f"--net={net[0]}", "--", *drop]
    ns = ["--unshare-user", "--userns-block-fd", str(block_fd), "--unshare-pid", "--unshare-ipc", "--unshare-uts",
          *(() if net is not None else ("--unshare-net",)), "--unshare-cgroup-try", "--uid", "0", "--gid", "0",
          "--hostname", config.hostname, "--die-with-parent", "--new-session", "--as-pid-1"]
    caps = [arg for cap in config.image_caps for arg in ("--cap-add", cap)]
    fs = system_binds(config) + [
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
        "--size", str(limits.tmp_bytes), "--tmpfs", "/dev/shm",
        "--ro-bind", guest_dir, GUEST_DIR,
        "--ro-bind", egress_socket, EGRESS_SOCKET,  # connect() works; chmod/chown/utime: EROFS
        "--dir", IMAGE_ROOT, "--dir", "/.sbx",
        "--remount-ro", "/",
        "--chdir", "/",
    ]
    env = ["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8"]
    port = net[1] if net is not None else config.proxy_port
    guest = [config.python_path(), "-I", "-S", f"{GUEST_DIR}/main.py", str(rpc_fd), str(port), EGRESS_SOCKET,
             IMAGE_ROOT]
    return [*drop, config.bwrap_path(), *ns, *caps, *fs, *env, "--info-fd", str(info_fd), "--", *guest]


def command_env(config: SandboxConfig) -> dict[str, str]:
    """Environment of every command: a clean PATH and locale, HOME in /tmp, proxy variables for egress."""
    proxy = f"http://127.0.0.1:{config.proxy_port}"
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/tmp", "TMPDIR": "/tmp",
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat",
        "PYTHONUNBUFFERED": "1",
        "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy,
        "NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
    }
    env.update(dict(config.env))
    return env
