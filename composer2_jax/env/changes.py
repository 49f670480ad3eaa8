"""What an episode changed in a workspace, read from the sandbox's own overlay layers (no second copy of the repo).

A workspace sandbox is an overlay: read-only lower layers (the chain it was forked from, top first) under its own
upper layer. Everything the episode did is in the upper layer and in the layers frozen from it since the fork (a
grading fork freezes the upper layer into a new layer on top of the chain):

    changed  = the upper layer + the chain's layers above the origin chain           ("top", top first)
    before   = the path as the origin chain shows it
    after    = the path as top + origin show it (overlay rules: a whiteout hides a path, an opaque directory hides
               everything below it in lower layers, a non-directory hides everything below its path)

Only the paths some top layer mentions can differ, so the cost is the size of the change, not of the repository.
Every file is read from the host without following symlinks (each path component opened with O_NOFOLLOW): the
layers hold whatever the agent wrote. A changed path that is not a UTF-8 text file of at most `max_file_bytes`
(a symlink, a binary, a big file, a device) is listed in `skipped` with the reason instead of being read.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import stat
from collections.abc import Sequence

OPAQUE = "trusted.overlay.opaque"
MAX_FILE_BYTES = 256 << 10  # a changed file larger than this on either side is skipped (not read)
MAX_FILES = 512  # changed paths beyond this many are skipped


@dataclasses.dataclass(frozen=True)
class WorkspaceChanges:
    """The text files an episode changed: their text before and after (None: absent on that side)."""

    before: dict[str, str | None]  # repository-relative path -> text before the episode (None: did not exist)
    after: dict[str, str | None]  # ... and after it (None: deleted)
    skipped: dict[str, str]  # changed paths not compared as text, and why

    @property
    def paths(self) -> list[str]:
        """The changed text files, sorted."""
        return sorted(self.after)

    def unified_diff(self, context: int = 3) -> str:
        """A unified diff (git-style a/ b/ headers, /dev/null for a created or deleted side) of every text change."""
        out = []
        for path in self.paths:
            old, new = self.before[path], self.after[path]
            out += difflib.unified_diff((old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                                        "/dev/null" if old is None else f"a/{path}",
                                        "/dev/null" if new is None else f"b/{path}", n=context)
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n\\ No newline at end of file\n"
        return "".join(out)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> WorkspaceChanges:
        """Inverse of to_dict."""
        return cls(dict(d["before"]), dict(d["after"]), dict(d.get("skipped") or {}))


# ------------------------------------------------------------------------------------------------ one layer


class _Entry:
    """What one layer says about one path."""

    MISSING, HIDDEN, DIR, FILE, OTHER = range(5)  # not mentioned | whiteout/hidden | directory | regular | else


def _lookup(layer: str, rel: str) -> tuple[int, bool]:
    """(what `layer` holds at `rel`, whether it hides every lower layer at `rel`) without following symlinks.

    An ancestor that is a whiteout or a non-directory hides the path; an opaque ancestor directory hides lower
    layers below it.
    """
    parts = rel.split("/")
    path = layer
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return _Entry.MISSING, False
        except NotADirectoryError:
            return _Entry.HIDDEN, True
        last = i == len(parts) - 1
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # overlay whiteout
            return _Entry.HIDDEN, True
        if not last and not stat.S_ISDIR(st.st_mode):
            return _Entry.HIDDEN, True
        if last:
            if stat.S_ISDIR(st.st_mode):
                return _Entry.DIR, _opaque(path)
            return (_Entry.FILE if stat.S_ISREG(st.st_mode) else _Entry.OTHER), True
        if _opaque(path):  # an opaque ancestor: lower layers have nothing below it
            rest = os.path.join(layer, *parts)
            if not os.path.lexists(rest):
                return _Entry.HIDDEN, True
    return _Entry.MISSING, False


def _opaque(path: str) -> bool:
    """An overlay directory whose lower-layer contents are hidden."""
    try:
        return os.getxattr(path, OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _resolve(layers: Sequence[str], rel: str) -> tuple[int, str | None]:
    """(kind, host path) of `rel` in the overlay of `layers` (top first): the first layer that holds or hides it."""
    for layer in layers:
        kind, final = _lookup(layer, rel)
        if kind in (_Entry.FILE, _Entry.OTHER):
            return kind, os.path.join(layer, rel)
        if kind == _Entry.DIR:
            return kind, None
        if final:
            return _Entry.HIDDEN, None
    return _Entry.MISSING, None


def _read_text(path: str, limit: int) -> tuple[str | None, str | None]:
    """(text, None) of a regular file opened with O_NOFOLLOW, or (None, why it is not compared as text)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        return None, f"unreadable: {e.strerror}"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_size > limit:
            return None, f"larger than {limit} bytes"
        data = f.read(limit + 1)
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "not UTF-8 text"


# ------------------------------------------------------------------------------------------------ the diff


def _walk(layer: str) -> tuple[list[str], list[str]]:
    """(paths of non-directories, paths of directories that hide lower contents) in one layer, no symlinks followed."""
    files, hiding = [], []
    for dirpath, dirnames, filenames in os.walk(layer, followlinks=False):
        rel = os.path.relpath(dirpath, layer)
        for name in dirnames:
            if _opaque(os.path.join(dirpath, name)):
                hiding.append(os.path.normpath(os.path.join(rel, name)))
        for name in filenames:  # (os.walk lists symlinks to directories among dirnames: they are not walked)
            files.append(os.path.normpath(os.path.join(rel, name)))
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                files.append(os.path.normpath(os.path.join(rel, name)))
    return files, hiding


def _below(layers: Sequence[str], prefix: str) -> list[str]:
    """Every non-directory path under `prefix` in any of the layers."""
    out = []
    for layer in layers:
        if _lookup(layer, prefix)[0] == _Entry.DIR:  # a real directory, reached through no symlink
            out += [os.path.normpath(os.path.join(prefix, p)) for p in _walk(os.path.join(layer, prefix))[0]]
    return out


def layer_changes(top: Sequence[str], origin: Sequence[str], max_file_bytes: int = MAX_FILE_BYTES,
                  max_files: int = MAX_FILES) -> WorkspaceChanges:
    """The text changes of the overlay top + origin over the overlay origin (layer directories, top first)."""
    candidates: set[str] = set()
    for layer in top:
        files, hiding = _walk(layer)
        candidates.update(files)
        for rel in files + hiding:  # a whiteout or an opaque/replacing directory hides what lower layers hold
            candidates.update(_below(list(top) + list(origin), rel))
    before, after, skipped = {}, {}, {}
    for rel in sorted(candidates):
        old_kind, old_path = _resolve(origin, rel)
        new_kind, new_path = _resolve(list(top) + list(origin), rel)
        if old_path == new_path and old_kind == new_kind:  # unchanged (the same layer shows it)
            continue
        if _Entry.OTHER in (old_kind, new_kind):
            skipped[rel] = "not a regular file"
            continue
        if len(after) >= max_files:
            skipped[rel] = f"more than {max_files} changed files"
            continue
        texts = []
        for path in (old_path, new_path):
            text, why = (None, None) if path is None else _read_text(path, max_file_bytes)
            if why is not None:
                skipped[rel] = why
                break
            texts.append(text)
        else:
            if texts[0] != texts[1]:
                before[rel], after[rel] = texts
    return WorkspaceChanges(before, after, skipped)
