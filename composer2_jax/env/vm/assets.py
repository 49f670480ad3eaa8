"""What a VM boots, built once and cached: a Debian kernel, an initramfs, a runtime disk and one root disk per image.

  kernel       vmlinuz of Debian's linux-image-cloud-amd64 (fetched with `apt-get download`, unpacked with dpkg-deb)
  initramfs    busybox-static, the virtio modules of that kernel, the guest init (vm/guest_init.py) and the guest
               process (env/guest); its /init mounts the runtime disk at /usr and the image disk at /.root,
               then starts the guest init as pid 1
  runtime disk ext4 (read-only, shared by every VM) with the host's python3 interpreter, its standard library and
               the shared libraries they load: the guest process runs on it, as a bubblewrap guest runs on the host's
  image disk   ext4 made with `mkfs.ext4 -d` from an image's merged layers (whiteouts applied, ownership unshifted
               to the image's own ids), cached per image key; every VM writes to its own qcow2 overlay on it

The cache lives in $COMPOSER2_VM_CACHE (default /var/cache/composer2/vm); entries are built under a lock and
renamed into place, so concurrent processes share them.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile

from composer2_jax.env.images import file_lock

CACHE_ENV = "COMPOSER2_VM_CACHE"
DEFAULT_CACHE = "/var/cache/composer2/vm"
KERNEL_PACKAGE = "linux-image-cloud-amd64"  # Debian's metapackage; its dependency is the versioned kernel
# Loaded in this order by /init (each depends only on earlier ones); virtio_net only when a VM has a network device.
MODULES = ("virtio_ring", "virtio", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci", "virtio_blk",
           "virtio_console", "failover", "net_failover", "virtio_net")
HERE = os.path.dirname(os.path.abspath(__file__))
GUEST_SRC = os.path.join(os.path.dirname(HERE), "guest")
PYTHON = "/usr/bin/python3.11"


class AssetError(RuntimeError):
    """A VM asset could not be fetched or built."""


def cache_dir() -> str:
    """$COMPOSER2_VM_CACHE, or /var/cache/composer2/vm."""
    return os.environ.get(CACHE_ENV) or DEFAULT_CACHE


def _run(argv: list[str], what: str, cwd: str | None = None, timeout_s: float = 600) -> str:
    """Run a host command; AssetError with its output if it fails."""
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as e:
        raise AssetError(f"{what}: {argv[0]} is not installed ({e})") from None
    if proc.returncode != 0:
        raise AssetError(f"{what} failed ({' '.join(argv)}): {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


def _cached(name: str, build) -> str:
    """cache_dir()/name, built by build(tmp_path) under a lock if it is missing."""
    root = cache_dir()
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, name)
    if os.path.exists(path):
        return path
    with file_lock(os.path.join(root, f".{name}.lock")):
        if not os.path.exists(path):
            tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=root)
            try:
                out = build(tmp)
                os.rename(out, path)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return path


# ------------------------------------------------------------------------------------------------ kernel


def kernel_dir() -> str:
    """A directory with `vmlinuz` and `modules/` (the MODULES, uncompressed) of Debian's cloud kernel."""
    return _cached("kernel", _build_kernel)


def _build_kernel(tmp: str) -> str:
    """apt-get download the versioned cloud kernel and unpack vmlinuz and the modules we load."""
    deps = _run(["apt-cache", "depends", KERNEL_PACKAGE], "apt-cache depends")
    names = [line.split(":", 1)[1].strip() for line in deps.splitlines() if line.strip().startswith("Depends:")]
    image = next((n for n in names if n.startswith("linux-image-")), None)
    if image is None:
        raise AssetError(f"apt-cache depends {KERNEL_PACKAGE} named no linux-image package: {deps!r} "
                         "(run apt-get update; Debian's archive must be in the apt sources)")
    _run(["apt-get", "download", image], f"downloading {image}", cwd=tmp)
    (deb,) = glob.glob(os.path.join(tmp, "*.deb"))
    _run(["dpkg-deb", "-x", deb, os.path.join(tmp, "x")], f"unpacking {deb}")
    out = os.path.join(tmp, "out")
    os.makedirs(os.path.join(out, "modules"))
    (vmlinuz,) = glob.glob(os.path.join(tmp, "x", "boot", "vmlinuz-*"))
    shutil.copy(vmlinuz, os.path.join(out, "vmlinuz"))
    found = {os.path.basename(p).split(".ko")[0]: p
             for p in glob.glob(os.path.join(tmp, "x", "lib", "modules", "*", "kernel", "**", "*.ko*"), recursive=True)}
    builtins = glob.glob(os.path.join(tmp, "x", "lib", "modules", "*", "modules.builtin"))
    builtin = "".join(open(p).read() for p in builtins)
    for name in MODULES:
        if name not in found:
            if f"/{name}.ko" in builtin:
                continue
            raise AssetError(f"module {name} is neither in {image} nor built into it")
        _copy_module(found[name], os.path.join(out, "modules", f"{name}.ko"))
    return out


def _copy_module(src: str, dest: str) -> None:
    """Copy a kernel module, decompressing .ko.xz / .ko.zst (busybox insmod loads plain .ko files)."""
    if src.endswith(".xz"):
        import lzma
        with lzma.open(src) as f, open(dest, "wb") as g:
            shutil.copyfileobj(f, g)
    elif src.endswith(".zst"):
        _run(["zstd", "-d", "-q", "-o", dest, src], f"decompressing {src}")
    else:
        shutil.copy(src, dest)


# ------------------------------------------------------------------------------------------------ runtime disk


def runtime_disk() -> str:
    """The read-only ext4 disk mounted at /usr in every guest: python3, its stdlib and the libraries they load."""
    digest = hashlib.sha256(f"{PYTHON}:{os.stat(PYTHON).st_size}:{os.stat(PYTHON).st_mtime_ns}".encode()).hexdigest()
    return _cached(f"runtime-{digest[:16]}.ext4", _build_runtime)


def _build_runtime(tmp: str) -> str:
    """Stage usr/{bin,lib,lib64} with python and every library ldd finds for it and its extension modules."""
    root = os.path.join(tmp, "usr")
    version = os.path.basename(PYTHON)
    stdlib = f"/usr/lib/{version}"
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy2(PYTHON, os.path.join(root, "bin", version))
    os.symlink(version, os.path.join(root, "bin", "python3"))
    shutil.copytree(stdlib, os.path.join(root, "lib", version), symlinks=True,
                    ignore=shutil.ignore_patterns("dist-packages", "site-packages", "test", "idlelib", "tkinter",
                                                  "ensurepip", "lib2to3"))
    binaries = [PYTHON] + glob.glob(os.path.join(stdlib, "lib-dynload", "*.so"))
    libs: set[str] = set()
    for binary in binaries:
        for line in _run(["ldd", binary], f"ldd {binary}").splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else (parts[0] if parts else "")
            if path.startswith("/"):
                libs.add(path)
    for lib in libs:
        real = os.path.realpath(lib)
        rel = os.path.relpath(real, "/usr") if real.startswith("/usr/") else real.lstrip("/")
        dest = os.path.join(root, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(real, dest)
        alias = os.path.join(os.path.dirname(dest), os.path.basename(lib))
        if not os.path.lexists(alias):
            os.symlink(os.path.basename(real), alias)
    os.makedirs(os.path.join(root, "lib64"), exist_ok=True)
    loader = os.path.join(root, "lib64", "ld-linux-x86-64.so.2")
    if not os.path.lexists(loader):
        os.symlink("../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", loader)
    out = os.path.join(tmp, "runtime.ext4")
    _mkfs(root, out, _tree_bytes(root) + (64 << 20))
    return out


def _tree_bytes(root: str) -> int:
    """Bytes the files under root occupy (apparent sizes plus 4 KiB per entry)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            total += os.lstat(os.path.join(dirpath, name)).st_size + 4096
    return total


def _mkfs(src: str, out: str, size_bytes: int) -> None:
    """An ext4 file system of size_bytes (sparse) holding a copy of src."""
    with open(out, "wb") as f:
        f.truncate(size_bytes)
    _run(["mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0", "-O", "^has_journal", "-d", src, out], f"mkfs.ext4 of {src}")


# ------------------------------------------------------------------------------------------------ initramfs


def initramfs() -> str:
    """The gzipped cpio every guest boots from (cached per content of busybox, modules, init and guest process)."""
    files = _initramfs_files()
    digest = hashlib.sha256()
    for dest, src in sorted(files.items()):
        digest.update(dest.encode())
        with open(src, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return _cached(f"initramfs-{digest.hexdigest()[:16]}.cpio.gz", lambda tmp: _build_initramfs(tmp, files))


def _initramfs_files() -> dict[str, str]:
    """Path in the initramfs -> host source file."""
    busybox = shutil.which("busybox")
    if busybox is None:
        raise AssetError("busybox not found; install it (Debian: apt-get install -y busybox-static)")
    files = {"busybox": busybox, "init": os.path.join(HERE, "init.sh"),
             "guest_init.py": os.path.join(HERE, "guest_init.py")}
    modules = os.path.join(kernel_dir(), "modules")
    files.update({f"modules/{name}": os.path.join(modules, name) for name in os.listdir(modules)})
    files.update({f"guest/{name}": os.path.join(GUEST_SRC, name)
                  for name in os.listdir(GUEST_SRC) if name.endswith(".py")})
    return files


def _build_initramfs(tmp: str, files: dict[str, str]) -> str:
    """Stage the files (plus the mount points and /lib, /bin links into /usr) and pack them with cpio."""
    root = os.path.join(tmp, "root")
    for d in ("proc", "sys", "dev", "usr", "tmp", ".root", "run", "etc"):
        os.makedirs(os.path.join(root, d))
    for link in ("lib", "lib64", "bin", "sbin"):
        os.symlink(f"usr/{link}" if link != "sbin" else "usr/bin", os.path.join(root, link))
    for dest, src in files.items():
        path = os.path.join(root, dest)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy(src, path)
    for name in ("busybox", "init"):
        os.chmod(os.path.join(root, name), 0o755)
    out = os.path.join(tmp, "initramfs.cpio.gz")
    names = _run(["find", ".", "-mindepth", "1"], "listing the initramfs", cwd=root)
    with open(out, "wb") as f:
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet", "-R", "0:0"], cwd=root, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=f)
        cpio.stdout.close()
        cpio.communicate(names.encode())
        if cpio.wait() != 0 or gz.wait() != 0:
            raise AssetError("packing the initramfs with cpio | gzip failed")
    return out


# ------------------------------------------------------------------------------------------------ image disks


def image_disk(image) -> str:
    """The ext4 root disk of an `images.Image` (its merged layers, ids unshifted), cached per image key."""
    return _cached(f"image-{image.key[:24]}.ext4", lambda tmp: _build_image_disk(tmp, image))


def _build_image_disk(tmp: str, image) -> str:
    """Mount the image's layers as a read-only overlay (in a private mount namespace), copy, unshift, mkfs."""
    stage = os.path.join(tmp, "root")
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    lower = ":".join(os.path.join(image.layer_root, layer) for layer in image.layers)
    script = 'mount -t overlay overlay -o "lowerdir=$1" "$2" && cp -a --no-dereference "$2/." "$3/"'
    os.makedirs(stage)
    _run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", lower, mnt, stage],
         f"copying image {image.name}'s layers")
    _unshift(stage, image.uid_base)
    out = os.path.join(tmp, "image.ext4")
    _mkfs(stage, out, max(4 << 30, 2 * _tree_bytes(stage)))
    return out


def _unshift(top: str, base: int) -> None:
    """Subtract base from every owner and group under top (layers are stored shifted: images.shift_ownership)."""
    seen: set[tuple[int, int]] = set()
    paths = [top] + [os.path.join(d, n) for d, dirs, files in os.walk(top) for n in dirs + files]
    for path in paths:
        st = os.lstat(path)
        if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        uid, gid = st.st_uid - base, st.st_gid - base
        if not (0 <= uid < 65536 and 0 <= gid < 65536):
            raise AssetError(f"{path} is owned by {st.st_uid}:{st.st_gid}; expected ids in {base}..{base + 65535}")
        os.lchown(path, uid, gid)
        if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            os.chmod(path, stat.S_IMODE(st.st_mode))
