"""Folders as compact, deterministic archives for copying into sandboxes (tests, solutions, step files)."""

from __future__ import annotations

import base64
import io
import os
import tarfile
from pathlib import Path


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
