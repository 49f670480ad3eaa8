"""The layer store: frozen, read-only directories that overlay stacks as a workspace's lower layers.

A chain is a tuple of layer ids, top first, always ending in the empty base layer. A repository becomes
one layer (copied once and owned by the sandbox user); a snapshot freezes a sandbox's upper layer, i.e.
only what changed since the previous snapshot, as a new layer on top of its chain. Forks share layers
(overlay never writes to lower layers), so a fork costs nothing in repository size.
"""

from __future__ import annotations

import collections
import itertools
import os
import secrets
import shutil
import stat
import subprocess
import threading

Chain = tuple[str, ...]
EMPTY = "empty"


class LayerStore:
    """Creates layers under `root` and deletes those no live chain uses."""

    def __init__(self, root: str, uid: int, gid: int):
        self.root, self.uid, self.gid = root, uid, gid
        self._ids = (f"L{secrets.token_hex(3)}{i:06x}" for i in itertools.count())
        self._lock = threading.Lock()
        self._pins: collections.Counter[str] = collections.Counter()  # layers in use by an operation: gc keeps them
        os.makedirs(root, mode=0o700, exist_ok=True)
        empty = self.path(EMPTY)
        if not os.path.isdir(empty):
            os.mkdir(empty, 0o755)
            os.chown(empty, uid, gid)

    def path(self, layer: str) -> str:
        """Host directory of a layer."""
        return os.path.join(self.root, layer)

    def _new(self) -> tuple[str, str]:
        """A fresh, not yet existing layer id and its path."""
        with self._lock:
            layer = next(self._ids)
            self._pins[layer] += 1
        return layer, self.path(layer)

    def pin(self, chain: Chain) -> None:
        """Keep a chain's layers from gc until the matching `commit` (while a sandbox is pointed at them)."""
        with self._lock:
            self._pins.update(layer for layer in chain if layer != EMPTY)

    def commit(self, chain: Chain) -> None:
        """Drop one pin from each layer of a chain (new layers start pinned); gc then judges them by use."""
        with self._lock:
            self._pins.subtract(layer for layer in chain if layer != EMPTY)
            self._pins = +self._pins

    def import_dir(self, src: str) -> Chain:
        """Copy a host directory into a new layer owned by the sandbox user; its chain."""
        if not os.path.isdir(src):
            raise NotADirectoryError(f"repository {src!r} is not a directory")
        layer, dest = self._new()
        _copy_tree(src, dest)
        subprocess.run(["chown", "-R", "-h", f"{self.uid}:{self.gid}", dest], check=True, capture_output=True)
        return (layer, EMPTY)

    def freeze(self, upper: str, chain: Chain) -> Chain:
        """Freeze an upper dir as a new layer on top of chain; the same chain if nothing changed."""
        if not os.listdir(upper):
            return chain
        layer, dest = self._new()
        _copy_tree(upper, dest)
        return (layer, *chain)

    def squash(self, chain: Chain, mountd) -> Chain:
        """Merge a long chain into a single layer (through a read-only overlay of it)."""
        layer, dest = self._new()
        os.mkdir(dest, 0o755)
        mountd.request("squash", layers_dir=self.root, chain=list(chain), dest=dest, empty=EMPTY)
        os.chown(dest, self.uid, self.gid)
        return (layer, EMPTY)

    def merge(self, chain: Chain) -> str:
        """Merge snapshot layers (top first) into one new layer that is still a diff: unlike `squash`, whiteouts
        and opaque directories that hide files of the lower (image) layers are kept. The new layer's id."""
        layer, dest = self._new()
        os.mkdir(dest, 0o755)
        for src in reversed(chain):
            _apply_diff(self.path(src), dest)
        return layer

    def gc(self, live: set[str]) -> list[str]:
        """Delete every layer not in `live` (except the empty base); returns the deleted ids."""
        # The pins and the listing are read under one lock: a layer is pinned (in `_new`) before its directory
        # exists, so every directory listed here is either pinned already or judged by `live`. Reading the pins
        # first and listing later let a concurrent import's fresh, pinned layer be deleted under it.
        with self._lock:
            keep = live | set(self._pins) | {EMPTY}
            doomed = [layer for layer in os.listdir(self.root) if layer not in keep and layer.startswith("L")]
        for layer in doomed:
            shutil.rmtree(self.path(layer), ignore_errors=True)
        return doomed


OPAQUE = "trusted.overlay.opaque"


def _is_whiteout(st: os.stat_result) -> bool:
    """An overlayfs whiteout: a character device 0/0."""
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _remove(path: str) -> None:
    """Delete whatever is at path (a directory recursively)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _apply_diff(src: str, dest: str) -> None:
    """Apply overlay diff src on top of diff dest, in place, so dest becomes the diff of both (whiteouts kept)."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        out_dir = dest if rel == "." else os.path.join(dest, rel)
        for name in list(dirnames):
            s_path, d_path = os.path.join(dirpath, name), os.path.join(out_dir, name)
            st = os.lstat(s_path)
            opaque = _xattr(s_path, OPAQUE) == b"y"
            if opaque or not (os.path.isdir(d_path) and not os.path.islink(d_path)):
                _remove(d_path)
                os.mkdir(d_path)
                if opaque:
                    os.setxattr(d_path, OPAQUE, b"y", follow_symlinks=False)
            os.lchown(d_path, st.st_uid, st.st_gid)
            os.chmod(d_path, stat.S_IMODE(st.st_mode))
        for name in filenames:
            s_path, d_path = os.path.join(dirpath, name), os.path.join(out_dir, name)
            st = os.lstat(s_path)
            _remove(d_path)
            if _is_whiteout(st):
                os.mknod(d_path, stat.S_IFCHR | 0o000, 0)
                os.lchown(d_path, st.st_uid, st.st_gid)
            else:
                proc = subprocess.run(["cp", "-a", "--no-dereference", s_path, d_path],
                                      capture_output=True, check=False)
                if proc.returncode != 0:
                    raise OSError(f"merging {s_path} failed: {proc.stderr.decode(errors='replace').strip()}")


def _xattr(path: str, name: str) -> bytes | None:
    """An extended attribute of path (not followed through symlinks), or None."""
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return None


def _copy_tree(src: str, dest: str) -> None:
    """cp -a: keeps ownership, modes, hard links, sparse files, overlay whiteouts and xattrs; never follows links."""
    os.mkdir(dest, 0o755)
    proc = subprocess.run(["cp", "-a", "--no-dereference", f"{src}/.", dest], capture_output=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        raise OSError(f"copying {src!r} into layer {dest!r} failed: {proc.stderr.decode(errors='replace').strip()}")
