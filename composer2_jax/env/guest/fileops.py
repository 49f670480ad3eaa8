"""File tools inside the sandbox: read, write, edit, list and grep, confined to /workspace.

Every path goes through `resolve`: relative paths are taken from /workspace, and a path that leaves the
workspace lexically or through a symlink is refused with kind "path_outside_workspace".
In an image sandbox (`configure(workdir, confined=False)`, called with the guest chrooted into the image's root)
the whole root filesystem is the model's machine: relative paths are taken from the image's working directory
and absolute paths may name any file, as they would in a container.
"""

import errno
import fnmatch
import json
import os
import re
import select
import signal
import stat
import time

WS = "/workspace"
_BASE = {"dir": WS, "confined": True}  # where relative paths start, and whether paths must stay below it
PSEUDO_FS = ("/proc", "/sys", "/dev")  # never walked by grep in an image sandbox
BINARY_PROBE = 8192
MAX_TEXT_BYTES = 64 << 20  # read_file and edit_file refuse larger files (they would be read whole)
_OS_ERRORS = {"ENOSPC": "no_space", "EDQUOT": "no_space", "EFBIG": "too_large", "EACCES": "permission_denied",
              "EPERM": "permission_denied", "EROFS": "permission_denied", "ENOTDIR": "not_found",
              "ENOENT": "not_found", "EISDIR": "is_directory", "ENAMETOOLONG": "invalid_arguments"}


class ToolError(Exception):
    """A tool failure with a machine-readable kind."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def os_error(e, path):
    """Map an OSError on `path` to a ToolError."""
    name = errno.errorcode.get(e.errno, "EIO")
    return ToolError(_OS_ERRORS.get(name, "os_error"), f"{path!r}: {os.strerror(e.errno or 5)} ({name})")


def configure(base, confined):
    """Take relative paths from `base`; with confined, refuse paths outside it (the /workspace rule)."""
    _BASE.update(dir=base, confined=confined)


def _inside(path):
    """True if the absolute, normalised path is the base directory or below it."""
    base = _BASE["dir"]
    return path == base or path.startswith(base.rstrip("/") + "/")


def resolve(path, exist=True):
    """Absolute real path of a workspace path; ToolError if it escapes or (when exist) is missing."""
    if "\x00" in path:
        raise ToolError("invalid_arguments", f"path {path!r} contains a NUL byte")
    base = _BASE["dir"]
    full = os.path.normpath(path if path.startswith("/") else os.path.join(base, path))
    if _BASE["confined"] and not _inside(full):
        raise ToolError("path_outside_workspace", f"path {path!r} is outside the workspace {base}")
    real = os.path.realpath(full)
    if _BASE["confined"] and not _inside(real):
        raise ToolError("path_outside_workspace",
                        f"path {path!r} resolves through a symlink to {real!r}, outside the workspace {base}")
    if exist and not os.path.exists(real):
        raise ToolError("not_found", f"path {path!r} does not exist")
    return real


def _rel(real):
    """Display path: relative to the base directory when below it, else absolute."""
    return os.path.relpath(real, _BASE["dir"]) if _inside(real) else real


def _read_text(real, path):
    """Whole file as text; ToolError for directories and binary files."""
    if os.path.isdir(real):
        raise ToolError("is_directory", f"path {path!r} is a directory; expected a file")
    try:
        size = os.path.getsize(real)
        if size > MAX_TEXT_BYTES:
            raise ToolError("too_large", f"path {path!r} has {size} bytes; expected at most {MAX_TEXT_BYTES} "
                                         "(use run_terminal_cmd with head, sed or grep)")
        with open(real, "rb") as f:
            data = f.read()
    except OSError as e:
        raise os_error(e, path) from None
    if b"\x00" in data[:BINARY_PROBE]:
        raise ToolError("binary_file", f"path {path!r} is a binary file ({len(data)} bytes); expected text")
    return data.decode("utf-8", "replace")


def _write_text(real, path, text):
    """Write text to a file, creating parent directories."""
    try:
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as e:
        raise os_error(e, path) from None


def read_file(req):
    """Lines start_line..end_line (1-based, inclusive) of a text file, at most max_bytes of them."""
    path = req["path"]
    lines = _read_text(resolve(path), path).splitlines(keepends=True)
    start, end = req.get("start_line") or 1, req.get("end_line") or len(lines)
    if lines and start > len(lines):
        raise ToolError("out_of_range", f"start_line={start} is past the end of {path!r} ({len(lines)} lines)")
    out, size, last, truncated = [], 0, start - 1, False
    for i in range(start - 1, min(end, len(lines))):
        size += len(lines[i].encode())
        if size > req["max_bytes"] and out:
            truncated = True
            break
        out.append(lines[i])
        last = i + 1
    return {"ok": True, "content": "".join(out), "start_line": start, "end_line": last,
            "total_lines": len(lines), "truncated": truncated}


def write_file(req):
    """Create or overwrite a file with the given text."""
    path = req["path"]
    real = resolve(path, exist=False)
    if os.path.isdir(real):
        raise ToolError("is_directory", f"path {path!r} is a directory; expected a file")
    created = not os.path.exists(real)
    _write_text(real, path, req["content"])
    return {"ok": True, "path": _rel(real), "bytes": len(req["content"].encode()), "created": created}


def edit_file(req):
    """Replace the one exact occurrence of old_string by new_string."""
    path, old = req["path"], req["old_string"]
    if not old:
        raise ToolError("invalid_arguments", "old_string is empty; expected the exact text to replace")
    real = resolve(path)
    text = _read_text(real, path)
    count = text.count(old)
    if count == 0:
        raise ToolError("no_match", f"old_string was not found in {path!r}")
    if count > 1:
        raise ToolError("multiple_matches",
                        f"old_string occurs {count} times in {path!r}; expected exactly 1 (add surrounding context)")
    at = text.index(old)
    _write_text(real, path, text[:at] + req["new_string"] + text[at + len(old):])
    return {"ok": True, "path": _rel(real), "line": text.count("\n", 0, at) + 1}


def _kind(mode):
    """Short type name of a stat mode."""
    return ("dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode)
            else "symlink" if stat.S_ISLNK(mode) else "other")


def list_dir(req):
    """Entries of a directory (name, type, size), sorted by name, at most max_entries of them."""
    path = req.get("path") or "."
    real = resolve(path)
    if not os.path.isdir(real):
        raise ToolError("not_a_directory", f"path {path!r} is not a directory")
    try:
        names = sorted(os.listdir(real))
    except OSError as e:
        raise os_error(e, path) from None
    entries = []
    for name in names[: req["max_entries"]]:
        try:
            st = os.lstat(os.path.join(real, name))
        except OSError:
            continue
        entries.append({"name": name, "type": _kind(st.st_mode), "size": st.st_size})
    return {"ok": True, "path": _rel(real), "entries": entries, "truncated": len(names) > len(entries)}


def _grep_files(root, glob):
    """Regular files under root (skipping .git), filtered by a glob on the workspace-relative path."""
    if os.path.isfile(root):
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and os.path.join(dirpath, d) not in PSEUDO_FS)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if glob and not (fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(_rel(full), glob)):
                continue
            if os.path.isfile(full) and not os.path.islink(full):
                yield full


def _grep_search(req, regex, root):
    """The search itself: matches as dicts, stopping at max_results."""
    matches = []
    for full in _grep_files(root, req.get("glob")):
        try:
            if os.path.getsize(full) > req["max_file_bytes"]:
                continue
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\x00" in data[:BINARY_PROBE]:
            continue
        for no, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                if len(matches) >= req["max_results"]:
                    return matches, True
                matches.append({"path": _rel(full), "line": no, "text": line[:500]})
    return matches, False


def grep(req, limits, set_limits):
    """Regex search over workspace files, run in a child process so a pathological pattern is time-bounded."""
    try:
        regex = re.compile(req["pattern"], re.IGNORECASE if req.get("ignore_case") else 0)
    except re.error as e:
        raise ToolError("invalid_arguments", f"pattern {req['pattern']!r} is not a valid regex: {e}") from None
    root = resolve(req.get("path") or ".")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _grep_child(req, regex, root, limits, set_limits, r, w)
    os.close(w)
    try:
        data = _read_until(r, req["timeout_s"])
    finally:
        os.close(r)
        _kill(pid)
    if data is None:
        raise ToolError("timeout", f"grep for {req['pattern']!r} took longer than {req['timeout_s']} s")
    return json.loads(data)


def _grep_child(req, regex, root, limits, set_limits, r, w):
    """Child side of grep: search under limits, write the JSON result, exit."""
    try:
        os.close(r)
        signal.set_wakeup_fd(-1)
        set_limits(limits)
        matches, truncated = _grep_search(req, regex, root)
        out = {"ok": True, "matches": matches, "truncated": truncated}
    except BaseException as e:  # noqa: BLE001 - the parent gets a structured error
        out = {"ok": False, "error": "os_error", "message": f"grep failed: {e}"}
    data = json.dumps(out).encode()
    while data:
        data = data[os.write(w, data):]
    os._exit(0)


def _read_until(fd, timeout_s):
    """Read fd to its end within timeout_s; None on timeout."""
    deadline, chunks = time.monotonic() + timeout_s, []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _kill(pid):
    """SIGKILL a helper child; the guest's reaper collects it."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
