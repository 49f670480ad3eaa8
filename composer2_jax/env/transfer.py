"""Folders as deterministic archives for copying into sandboxes (tests, solutions, step files).

`pack_tree` (what `Environment.put_dir` sends) is an uncompressed tar, so unpacking it needs no gzip or zlib where it
is unpacked (the guest, chrooted into an image whose Python may have neither, or no Python at all); `pack_parts`
splits a large folder into several such archives, each within one RPC frame. `pack_dir` (a gzipped tar) stays for the
oracle's and the forging benchmarks' in-sandbox `tar -xz` / python unpacking.
"""

from __future__ import annotations

import base64
import io
import os
import stat
import tarfile
from pathlib import Path

PART_BYTES = 96 << 20  # raw bytes per archive of pack_parts (base64 of it stays well inside the guest's 256 MiB frame)


class TransferError(ValueError):
    """A file of the folder cannot be packed (a device, socket or fifo; unreadable; too large); names the file."""


def pack_dir(folder: str | os.PathLike, exclude: tuple[str, ...] = ()) -> str:
    """A folder as base64 of a gzipped tar (paths relative to the folder, deterministic order, owner 0, mtime 0),
    less the paths in `exclude` (relative to the folder; an excluded folder takes its contents with it)."""
    folder = Path(folder)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if "__pycache__" in path.parts or any(str(p) in exclude for p in (rel, *rel.parents)):
                continue
            info = tf.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if path.is_file() and not path.is_symlink():
                with open(path, "rb") as f:
                    tf.addfile(info, f)
            elif (path.is_dir() and not path.is_symlink()) or path.is_symlink():
                tf.addfile(info)
    return base64.b64encode(buf.getvalue()).decode()


def _members(folder: Path, exclude: tuple[str, ...]):
    """(relative name, TarInfo, path) of every entry, sorted, owner 0, mtime 0; hard links become regular files."""
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if "__pycache__" in path.parts or any(str(p) in exclude for p in (rel, *rel.parents)):
            continue
        try:
            st = os.lstat(path)
        except OSError as e:
            raise TransferError(f"cannot copy {rel}: {e.strerror}") from None
        info = tarfile.TarInfo(str(rel))
        info.mode, info.uid, info.gid, info.uname, info.gname, info.mtime = stat.S_IMODE(st.st_mode), 0, 0, "", "", 0
        if stat.S_ISLNK(st.st_mode):
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
        elif stat.S_ISDIR(st.st_mode):
            info.type = tarfile.DIRTYPE
        elif stat.S_ISREG(st.st_mode):
            info.type, info.size = tarfile.REGTYPE, st.st_size
        else:
            raise TransferError(f"cannot copy {rel}: not a regular file, directory or symlink (mode {oct(st.st_mode)})")
        yield str(rel), info, path


def pack_parts(folder: str | os.PathLike, exclude: tuple[str, ...] = (), part_bytes: int | None = None) -> list[str]:
    """A folder as base64 uncompressed tars of at most about part_bytes (default PART_BYTES) each (a file larger than
    that alone in one, up to twice that; directories before their contents), less `exclude`; TransferError naming a
    file that cannot be packed."""
    folder = Path(folder)
    part_bytes = PART_BYTES if part_bytes is None else part_bytes
    parts: list[str] = []
    buf, tf, used = None, None, 0

    def flush():
        nonlocal buf, tf, used
        if tf is not None:
            tf.close()
            parts.append(base64.b64encode(buf.getvalue()).decode())
        buf, tf, used = None, None, 0

    for rel, info, path in _members(folder, exclude):
        size = info.size if info.isreg() else 0
        if size > part_bytes * 2:
            raise TransferError(f"cannot copy {rel}: {size} bytes; at most {part_bytes * 2} per file")
        if tf is not None and used + size > part_bytes:
            flush()
        if tf is None:
            buf = io.BytesIO()
            tf = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
        if info.isreg():
            try:
                with open(path, "rb") as f:
                    tf.addfile(info, f)
            except OSError as e:
                raise TransferError(f"cannot copy {rel}: {e.strerror or e}") from None
        else:
            tf.addfile(info)
        used += size + 512
    flush()
    return parts or [pack_tree_empty()]


def pack_tree_empty() -> str:
    """An empty uncompressed tar, base64."""
    buf = io.BytesIO()
    tarfile.open(fileobj=buf, mode="w").close()
    return base64.b64encode(buf.getvalue()).decode()


def pack_tree(folder: str | os.PathLike, exclude: tuple[str, ...] = ()) -> str:
    """A folder as one base64 uncompressed tar (modes, symlinks, empty files kept); see pack_parts."""
    parts = pack_parts(folder, exclude, part_bytes=1 << 62)
    return parts[0]
