"""Privileged mount helper: mounts a sandbox's workspace inside that sandbox's mount namespace.

Usage: python3 -I -S mountd.py   (one JSON request per stdin line, one JSON reply per stdout line)

Runs as host root, single-threaded (setns into a mount namespace needs that), stdlib only. For a sandbox
whose guest process has host pid P it: clones the layer store as a detached mount (open_tree), enters P's mount
namespace, mounts a size-limited tmpfs on /.sbx (hidden from the sandbox user by mode 0700) holding the
upper and work dirs, attaches the clone at /.sbx/layers (move_mount: overlay takes lower layers only from
the caller's mount namespace), mounts the overlay on /workspace, detaches /.sbx/layers again (overlay keeps
private clones of its lowers), and returns to its own namespace. The sandbox never sees the layer store.
For an image sandbox (`mount_root`) the overlay is the whole root filesystem, at /.root: its lowers are the
sandbox's snapshot layers over the image's exported layers (more detached trees, /.sbx/images<i>), the
sandbox's /proc and /dev are bound into it, and /etc/hosts is a small per-sandbox file, as in a container.
Needs Linux >= 5.2 (open_tree, move_mount).
"""

import ctypes
import json
import os
import subprocess
import sys
import tempfile

SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # the same numbers on every architecture (new syscalls are unified)
OPEN_TREE_CLONE = 1
MOVE_MOUNT_F_EMPTY_PATH = 4
AT_FDCWD = -100
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_NOSUID, MS_NODEV, MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 2, 4, 1, 32, 4096, 16384
MNT_DETACH = 2
EINVAL = 22
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _check(ret, what):
    """Raise OSError naming `what` when a libc call failed."""
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def mount(source, target, fstype, flags, data):
    """mount(2)."""
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode()),
           f"mount {fstype} on {target} ({data})")


def umount(target):
    """Lazy umount(2); a target that is not a mount point is fine."""
    if _libc.umount2(target.encode(), MNT_DETACH) < 0 and ctypes.get_errno() != EINVAL:
        _check(-1, f"umount {target}")


def setns(fd):
    """Enter the mount namespace behind fd."""
    _check(_libc.setns(fd, CLONE_NEWNS), "setns(CLONE_NEWNS)")


def open_tree_clone(path):
    """A detached copy of the mount at path, as an fd."""
    return _check(_libc.syscall(SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | os.O_CLOEXEC),
                  f"open_tree({path})")


def move_mount(fd, target):
    """Attach the detached mount behind fd at target (in the current mount namespace)."""
    _check(_libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH),
           f"move_mount(-> {target})")


def lowerdirs(chain, prefix="", image_prefix=None):
    """Lower layer ids (top first) joined for overlay, after checking each is a plain directory name.

    Image layers (ids starting with "I") get image_prefix(layer) instead of prefix when it is given.
    """
    for layer in chain:
        if not layer or any(c in layer for c in ":,/\\") or layer in (".", ".."):
            raise ValueError(f"layer id {layer!r} is not a plain directory name")
    if not chain:
        raise ValueError("a layer chain needs at least one layer")

    def pick(layer):
        return image_prefix(layer) if image_prefix is not None and layer.startswith("I") else prefix

    return ":".join(pick(layer) + layer for layer in chain)


def mount_workspace(req, home_ns):
    """(Re)mount /.sbx and /workspace in the mount namespace of req['pid']."""
    tree = open_tree_clone(req["layers_dir"])
    target = os.open(f"/proc/{req['pid']}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns(target)
        try:
            umount("/workspace")
            umount("/.sbx")
            inodes = max(10_000, req["size_bytes"] // 4096)
            mount("tmpfs", "/.sbx", "tmpfs", MS_NOSUID | MS_NODEV,
                  f"size={req['size_bytes']},nr_inodes={inodes},mode=0700")
            os.mkdir("/.sbx/upper", 0o755)
            os.chown("/.sbx/upper", req["uid"], req["gid"])
            os.mkdir("/.sbx/work", 0o700)
            os.mkdir("/.sbx/layers", 0o700)
            move_mount(tree, "/.sbx/layers")
            try:
                mount("overlay", "/workspace", "overlay", MS_NOSUID | MS_NODEV,
                      f"lowerdir={lowerdirs(req['chain'], '/.sbx/layers/')},upperdir=/.sbx/upper,workdir=/.sbx/work")
            finally:
                umount("/.sbx/layers")
        finally:
            setns(home_ns)
            os.chdir("/")
    finally:
        os.close(target)
        os.close(tree)
    return {"ok": True}


def _ensure(path, uid, gid, make):
    """Create path with make(path) if missing, owned by uid:gid (the sandbox's root)."""
    if not os.path.lexists(path):
        make(path)
        os.lchown(path, uid, gid)


def mount_root(req, home_ns):
    """(Re)mount an image sandbox's root filesystem at /.root in the mount namespace of req['pid']."""
    trees = {"layers": open_tree_clone(req["layers_dir"])}
    trees.update({f"images{i}": open_tree_clone(d) for i, d in enumerate(req["image_dirs"])})
    target = os.open(f"/proc/{req['pid']}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    uid, gid = req["uid"], req["gid"]
    try:
        setns(target)
        try:
            umount("/.root")
            umount("/.sbx")
            inodes = max(10_000, req["size_bytes"] // 4096)
            mount("tmpfs", "/.sbx", "tmpfs", MS_NOSUID | MS_NODEV,
                  f"size={req['size_bytes']},nr_inodes={inodes},mode=0700")
            os.mkdir("/.sbx/upper", 0o755)
            os.chown("/.sbx/upper", uid, gid)
            os.mkdir("/.sbx/work", 0o700)
            for name, tree in trees.items():
                os.mkdir(f"/.sbx/{name}", 0o700)
                move_mount(tree, f"/.sbx/{name}")
            try:
                lower = lowerdirs(req["chain"], "/.sbx/layers/",
                                  lambda layer: f"/.sbx/images{req['image_index'][layer]}/")
                mount("overlay", "/.root", "overlay", MS_NODEV,
                      f"lowerdir={lower},upperdir=/.sbx/upper,workdir=/.sbx/work")
            finally:
                for name in trees:
                    umount(f"/.sbx/{name}")
            for name in ("proc", "dev"):
                _ensure(f"/.root/{name}", uid, gid, lambda p: os.mkdir(p, 0o755))
                mount(f"/{name}", f"/.root/{name}", "none", MS_BIND | MS_REC, "")
            with open("/.sbx/hosts", "w") as f:
                f.write(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                        f"127.0.1.1\t{req['hostname']}\n")
                if req.get("aliases"):  # the other services of a shared network (env/netns.py)
                    f.write("127.0.0.1\t" + " ".join(req["aliases"]) + "\n")
            os.chown("/.sbx/hosts", uid, gid)
            _ensure("/.root/etc", uid, gid, lambda p: os.mkdir(p, 0o755))
            _ensure("/.root/etc/hosts", uid, gid, lambda p: open(p, "w").close())
            mount("/.sbx/hosts", "/.root/etc/hosts", "none", MS_BIND, "")
        finally:
            setns(home_ns)
            os.chdir("/")
    finally:
        os.close(target)
        for tree in trees.values():
            os.close(tree)
    return {"ok": True}


def squash(req, home_ns):
    """Copy the merged view of a layer chain into req['dest'] (a new single layer)."""
    chain = req["chain"] if len(req["chain"]) >= 2 else req["chain"] + [req["empty"]]  # read-only overlay: 2+ lowers
    with tempfile.TemporaryDirectory(prefix="squash-") as mnt:
        os.chdir(req["layers_dir"])
        try:
            mount("overlay", mnt, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, f"lowerdir={lowerdirs(chain)}")
        finally:
            os.chdir("/")
        try:
            subprocess.run(["cp", "-a", f"{mnt}/.", req["dest"]], check=True, capture_output=True)
        finally:
            umount(mnt)
    return {"ok": True}


def seal(req, home_ns):
    """At a sandbox's start: remount the host device nodes bound into /dev read-only (so no metadata call reaches the
    host's inodes; a device still reads and writes on a read-only mount), and refuse nested user namespaces where
    req['deny_userns'] says so."""
    target = os.open(f"/proc/{req['pid']}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns(target)
        try:
            for node in req["dev_nodes"]:
                path = f"/dev/{node}"
                if os.path.lexists(path):
                    mount("none", path, "none", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, "")
        finally:
            setns(home_ns)
            os.chdir("/")
    finally:
        os.close(target)
    if req.get("deny_userns"):
        deny_userns(req, home_ns)
    return {"ok": True}


def deny_userns(req, home_ns):
    """Set user.max_user_namespaces to 0 in the user namespace of req['pid'] (nested user namespaces refused there).

    The sysctl is per user namespace and writable only with CAP_SYS_RESOURCE in it, which root in an image sandbox
    lacks: a forked child of this helper (single-threaded, not chrooted) enters the namespace, where host root holds
    every capability, and writes it."""
    target = os.open(f"/proc/{req['pid']}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    r, w = os.pipe()
    try:
        child = os.fork()
        if child == 0:
            os.close(r)
            try:
                _check(_libc.setns(target, CLONE_NEWUSER), "setns(CLONE_NEWUSER)")
                with open("/proc/sys/user/max_user_namespaces", "w") as f:
                    f.write("0")
                with open("/proc/sys/user/max_user_namespaces") as f:
                    if f.read().strip() != "0":
                        raise OSError("max_user_namespaces did not become 0")
                os._exit(0)
            except BaseException as e:  # noqa: BLE001 - report anything, then die
                os.write(w, f"{type(e).__name__}: {e}".encode()[:1000])
                os._exit(1)
        os.close(w)
        w = -1
        why = b""
        while chunk := os.read(r, 4096):
            why += chunk
        _, status = os.waitpid(child, 0)
        if status != 0:
            raise OSError(f"could not refuse nested user namespaces: {why.decode(errors='replace') or status}")
    finally:
        os.close(target)
        os.close(r)
        if w >= 0:
            os.close(w)
    return {"ok": True}


OPS = {"mount_workspace": mount_workspace, "mount_root": mount_root, "squash": squash, "seal": seal,
       "ping": lambda req, ns: {"ok": True}}


def main():
    """Serve requests from stdin until it closes."""
    home_ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply = OPS[req["op"]](req, home_ns)
        except Exception as e:  # noqa: BLE001 - every request gets an answer
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
