"""Client of the privileged mount helper (`mountd.py`): one long-lived, single-threaded helper process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

MOUNTD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mountd.py")


class MountError(OSError):
    """The mount helper refused or failed an operation."""


class MountHelper:
    """Starts mountd on first use and sends it one request at a time."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> subprocess.Popen:
        """The running helper, (re)started if needed."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-I", "-S", MOUNTD], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, text=True, bufsize=1)
        return self._proc

    def request(self, op: str, **fields) -> dict:
        """Send one request and return the reply; MountError on failure."""
        with self._lock:
            proc = self._ensure()
            try:
                proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except (BrokenPipeError, OSError) as e:
                raise MountError(f"mount helper died during {op}: {e}") from None
        if not line:
            raise MountError(f"mount helper exited during {op} (exit status {proc.poll()})")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise MountError(f"mount helper could not {op}: {reply.get('error')}")
        return reply

    def mount_workspace(self, pid: int, layers_dir: str, chain, uid: int, gid: int, size_bytes: int) -> None:
        """(Re)mount a fresh upper tmpfs and the overlay /workspace inside the sandbox whose guest is `pid`."""
        self.request("mount_workspace", pid=pid, layers_dir=layers_dir, chain=list(chain), uid=uid, gid=gid,
                     size_bytes=size_bytes)

    def close(self) -> None:
        """Stop the helper."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            self._proc = None
