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

    def gc(self, live: set[str]) -> list[str]:
        """Delete every layer not in `live` (except the empty base); returns the deleted ids."""
        deleted = []
        with self._lock:
            keep = live | set(self._pins) | {EMPTY}
        for layer in os.listdir(self.root):
            if layer not in keep and layer.startswith("L"):
                shutil.rmtree(self.path(layer), ignore_errors=True)
                deleted.append(layer)
        return deleted


def _copy_tree(src: str, dest: str) -> None:
    """cp -a: keeps ownership, modes, hard links, sparse files, overlay whiteouts and xattrs; never follows links."""
    os.mkdir(dest, 0o755)
    proc = subprocess.run(["cp", "-a", "--no-dereference", f"{src}/.", dest], capture_output=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        raise OSError(f"copying {src!r} into layer {dest!r} failed: {proc.stderr.decode(errors='replace').strip()}")
