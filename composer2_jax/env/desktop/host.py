"""The host half of the desktop: the browser tools as the deploy harness offers them, on any Environment.

`DesktopEnvironment` wraps an environment (an `Environment`, an `EnvironmentClient`, or any backend with the same
`exec`, `put_dir`, `episode` and `call` methods) and adds the desktop tools of
`tool_schemas.DESKTOP_TOOL_NAMES` to its coding tools. A desktop tool call is validated against its schema here,
then runs one operation of the guest driver (guest/cdp.py) inside the sandbox with `exec`; nothing else of the
sandbox is touched, so the same code drives a desktop on any backend that runs the desktop image.
Like `Environment.call`, `call` never raises: malformed arguments, a missing browser, a dead sandbox all come back
as error observations.

Screenshots: the observation's content is the page as text (for text-only models); the PNG rides in
`fields["artifacts"]` ({"kind": "screenshot", "mime": "image/png", "name", "width", "height", "bytes", "sha256",
"data_b64"}), which the harness keeps in the episode record (`harness.ToolCallRecord.artifacts`,
`EpisodeResult.save_artifacts`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import secrets
import shlex
import struct
import threading
from typing import Any

from composer2_jax.env.observation import ERROR_KINDS, Observation
from composer2_jax.env.tool_schemas import DESKTOP_TOOL_NAMES, ArgumentError, parse_arguments, tool_specs

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGE_CONTEXT = os.path.join(HERE, "image")  # the desktop image's build context (its Dockerfile)
GUEST_DIR = os.path.join(HERE, "guest")  # copied into each sandbox on first use
GUEST_DEST = "/tmp/.composer2-desktop-guest"
STATE = "/tmp/.composer2-desktop"  # the guest's state dir (guest/cdp.py STATE)
MISSING_GUEST = 97  # exit code of the tool command when the guest driver is not in the sandbox (yet, or any more)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_OPS = {"browser_open": "open", "browser_click": "click", "browser_type": "type", "browser_read": "read",
        "screenshot": "screenshot"}
_READ_CHUNK = ("import base64, os, sys; p, o, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]); "
               "f = open(p, 'rb'); f.seek(o); d = f.read(n); f.close(); "
               "sys.stdout.write(base64.b64encode(d).decode()); o + n >= os.path.getsize(p) and os.unlink(p)")


@dataclasses.dataclass(frozen=True)
class DesktopConfig:
    """How the desktop inside a sandbox runs."""

    width: int = 1280  # screen and browser window width in pixels (screenshots are exactly this wide)
    height: int = 800  # screen and browser window height in pixels
    display: str = ":99"  # the X display Xvfb serves
    port: int = 9222  # Chromium's DevTools port, on the sandbox's own loopback
    window_manager: str = "openbox"  # started after Xvfb ("" for none)
    chromium: str = "chromium"  # the browser binary (Debian's package name)
    timeout_s: float = 60.0  # desktop start, page load and settle limit per operation
    max_chars: int = 20_000  # page text / accessibility tree kept per observation (the rest marked)
    chunk: int = 20_000  # bytes of a result per exec reply (its base64 stays within SandboxLimits.output_bytes)

    def __post_init__(self):
        for name in ("width", "height", "port", "max_chars", "chunk"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"DesktopConfig.{name}={value!r}; expected a positive integer")
        if not 1 <= self.port <= 65535:
            raise ValueError(f"DesktopConfig.port={self.port}; expected 1..65535")
        if not (self.display.startswith(":") and self.display[1:].isdigit()):
            raise ValueError(f"DesktopConfig.display={self.display!r}; expected ':N'")
        if self.timeout_s <= 0:
            raise ValueError(f"DesktopConfig.timeout_s={self.timeout_s}; expected > 0")

    def guest(self) -> dict:
        """The settings the guest driver reads."""
        return {**dataclasses.asdict(self), "window_manager": self.window_manager or None}


def desktop_image(builder) -> Any:
    """The desktop image (an `images.Image`), built once per image cache by `builder` (an `images.ImageBuilder`)."""
    return builder.build(IMAGE_CONTEXT)


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; ValueError if data is not a PNG."""
    if data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR" or len(data) < 24:
        raise ValueError(f"not a PNG: starts with {data[:16]!r}; expected the PNG signature and an IHDR chunk")
    return struct.unpack("!II", data[16:24])


class DesktopEnvironment:
    """An environment whose sandboxes run the desktop image: its tools plus the browser tools (module docstring)."""

    def __init__(self, env: Any, config: DesktopConfig | None = None):
        self.env, self.config = env, config or DesktopConfig()
        self._shots: dict[str, int] = {}
        self._lock = threading.Lock()

    def tools(self) -> list[dict]:
        """The environment's tools, then the desktop tools."""
        return list(self.env.tools()) + tool_specs(DESKTOP_TOOL_NAMES)

    def __getattr__(self, name: str) -> Any:
        """Everything else (fork, close, snapshot, exec, ...) is the environment's."""
        return getattr(self.env, name)

    def start(self, sid: str) -> dict:
        """Start the desktop (Xvfb, window manager, Chromium) now rather than on the first tool call; RuntimeError
        naming the cause if it does not come up."""
        result = self._guest(sid, "start", {})
        if not result.get("ok"):
            raise RuntimeError(f"the desktop of {sid} did not start: {result.get('message')}")
        return result

    def call(self, sid: str, tool: Any, args: Any = None) -> Observation:
        """A tool call: desktop tools run here, every other tool is the environment's. Never raises."""
        if tool not in DESKTOP_TOOL_NAMES:
            return self.env.call(sid, tool, args)
        try:
            parsed = parse_arguments(tool, args, names=DESKTOP_TOOL_NAMES)
            _check_click(tool, parsed)
            if self.env.episode(sid).get("submitted"):
                return Observation.failure("already_submitted", f"the episode was submitted; {tool} is not possible")
            result = self._guest(sid, _OPS[tool], parsed)
            if not result.get("ok"):
                kind = result.get("error") if result.get("error") in ERROR_KINDS else "sandbox_error"
                return Observation.failure(kind, f"{tool}: {result.get('message')}")
            return self._observation(sid, tool, result)
        except ArgumentError as e:
            return Observation.failure(e.kind, str(e))
        except KeyError as e:
            return Observation.failure("unknown_sandbox", str(e).strip("'\""))
        except Exception as e:  # noqa: BLE001 - a tool call must never raise into the rollout
            return Observation.failure("sandbox_error", f"{tool}: {type(e).__name__}: {e}")

    # ------------------------------------------------------------------------------------------------ guest calls

    def _guest(self, sid: str, op: str, args: dict) -> dict:
        """Run one guest operation in the sandbox (copying the driver in first if it is not there); its result."""
        payload = base64.b64encode(json.dumps({"desktop": self.config.guest(), "args": args}).encode()).decode()
        out = f"{STATE}/out-{secrets.token_hex(6)}.json"
        command = (f"G={GUEST_DEST}/cdp.py; [ -f $G ] || exit {MISSING_GUEST}; mkdir -p {STATE} && "
                   f"exec python3 $G {op} {payload} {out}")
        timeout = 3 * self.config.timeout_s + 30  # a start, a load and a settle may each take timeout_s
        reply = self.env.exec(sid, command, timeout_s=timeout)
        if reply.get("exit_code") == MISSING_GUEST:  # root-owned and world-readable: any image user runs it
            self.env.put_dir(sid, GUEST_DIR, GUEST_DEST)
            reply = self.env.exec(sid, command, timeout_s=timeout)
        if reply.get("exit_code") != 0 or reply.get("stdout_tail"):
            raise RuntimeError(f"the desktop driver failed (exit {reply.get('exit_code')}): "
                               f"{(reply.get('stderr') or reply.get('stdout') or '')[-2000:]}")
        size, _, first = reply["stdout"].partition("\n")
        data = base64.b64decode(first)
        while len(data) < int(size):
            chunk = self.env.exec(sid, f"python3 -c {shlex.quote(_READ_CHUNK)} {out} {len(data)} "
                                       f"{self.config.chunk}", timeout_s=60)
            if chunk.get("exit_code") != 0 or chunk.get("stdout_tail") or not chunk.get("stdout"):
                raise RuntimeError(f"reading the desktop result {out} at byte {len(data)} failed: "
                                   f"{chunk.get('stderr', '')[-1000:]}")
            data += base64.b64decode(chunk["stdout"])
        return json.loads(data)

    def _observation(self, sid: str, tool: str, r: dict) -> Observation:
        """What the model reads: a status line, the page's url and title, then its text (or accessibility tree)."""
        fields = {k: r[k] for k in ("url", "title", "restarted") if k in r}
        head = {"browser_open": f"opened {r.get('url')}",
                "browser_click": f"clicked {r.get('clicked')} at ({r.get('x')}, {r.get('y')})",
                "browser_type": f"typed {r.get('typed')} characters" + (
                    f" into the focused {r['focused']['tag']}" if r.get("focused") else ""),
                "browser_read": "page", "screenshot": ""}[tool]
        if tool == "screenshot":
            artifact = self._artifact(sid, r["png_b64"])
            fields["artifacts"] = [artifact]
            head = (f"screenshot {artifact['width']}x{artifact['height']} PNG ({artifact['bytes']} bytes) stored as "
                    f"{artifact['name']}; the page as text follows")
        if r.get("restarted"):
            head += "\n(the desktop was not running and was started; the browser begins at about:blank)"
        body = [f"url: {r.get('url')}", f"title: {r.get('title')}"]
        if "text" in r:
            body += ["", r["text"]]
        if "accessibility" in r:
            body += ["", "accessibility tree:", r["accessibility"]]
            fields["accessibility"] = r["accessibility"]
        fields.update({k: r[k] for k in ("text", "focused", "typed") if k in r})
        return Observation(True, "\n".join([head, *body]), fields)

    def _artifact(self, sid: str, png_b64: str) -> dict:
        """The screenshot as an episode artifact (checked to be a PNG; its size read from IHDR)."""
        data = base64.b64decode(png_b64)
        width, height = png_size(data)
        with self._lock:
            n = self._shots[sid] = self._shots.get(sid, 0) + 1
        return {"kind": "screenshot", "mime": "image/png", "name": f"screenshot-{sid}-{n}.png", "width": width,
                "height": height, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "data_b64": png_b64}


def _check_click(tool: str, args: dict) -> None:
    """browser_click takes a selector, or both x and y; anything else is invalid_arguments naming what came."""
    if tool != "browser_click":
        return
    point = [k for k in ("x", "y") if k in args]
    if ("selector" in args) == bool(point) or len(point) == 1:
        raise ArgumentError("invalid_arguments", f"browser_click takes either selector or both x and y; got "
                                                 f"{sorted(args) or 'no arguments'}")
