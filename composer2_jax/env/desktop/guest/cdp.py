"""The desktop's in-sandbox half: starts Xvfb, openbox and Chromium, and drives Chromium over the DevTools protocol.

Standard library only (it runs on the image's python3, inside the sandbox or VM). One invocation is one operation:

    python3 cdp.py OP ARGS_B64 OUT_PATH

ARGS_B64 is base64 of a JSON object (the desktop settings under "desktop", the tool's arguments under "args");
the result, {"ok": true, ...} or {"ok": false, "error": kind, "message": ...}, is written as JSON to OUT_PATH,
and its size and base64 of its first desktop["chunk"] bytes are printed (a screenshot does not fit in a command's
captured stdout: the caller reads the rest of OUT_PATH in more chunks). Operations: start, open,
click, type, read, screenshot. Every operation but `start` starts the desktop first if it is not running (a
files-only snapshot, fork or restore stops processes), so the page is then about:blank again.

The DevTools client speaks WebSocket (RFC 6455) by hand: an HTTP upgrade, masked client frames, fragmented and
64-bit-length server frames, ping answered by pong. Chromium listens on 127.0.0.1 of the sandbox's own network
namespace only (--remote-debugging-address), so nothing outside the sandbox reaches the DevTools port.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time
import urllib.parse

STATE = "/tmp/.composer2-desktop"  # logs, the Chromium profile, the pid file
HIDDEN_ROLES = (None, "", "none", "generic", "InlineTextBox")  # accessibility nodes not shown (their children are)


class DesktopError(Exception):
    """An operation failed; kind is the observation's error kind."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


# ------------------------------------------------------------------------------------------------ WebSocket


def frame(opcode: int, payload: bytes, mask: bytes) -> bytes:
    """One final client frame: FIN + opcode, the masked length, the mask key, the masked payload (RFC 6455 5.2)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


def read_frame(recv_exact) -> tuple[bool, int, bytes]:
    """(fin, opcode, payload) of one frame read through recv_exact(n) (server frames are unmasked; a mask is undone)."""
    b0, b1 = recv_exact(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", recv_exact(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(8))[0]
    mask = recv_exact(4) if b1 & 0x80 else None
    payload = recv_exact(n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bool(b0 & 0x80), b0 & 0x0F, payload


class WebSocket:
    """A minimal text WebSocket client (enough for the DevTools protocol)."""

    def __init__(self, url: str, timeout: float):
        parts = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise DesktopError("sandbox_error", f"DevTools closed the WebSocket handshake of {url}")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            raise DesktopError("sandbox_error", f"DevTools refused the WebSocket: {head.splitlines()[0]!r}")

    def _exact(self, n: int) -> bytes:
        """Exactly n bytes from the socket."""
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(min(n - len(out), 1 << 20))
            if not chunk:
                raise DesktopError("sandbox_error", "the browser closed the DevTools connection")
            out += chunk
        return bytes(out)

    def send(self, text: str) -> None:
        """Send one text message."""
        self.sock.sendall(frame(0x1, text.encode(), os.urandom(4)))

    def recv(self) -> str:
        """The next text message (continuation frames joined, pings answered)."""
        parts: list[bytes] = []
        while True:
            fin, opcode, payload = read_frame(self._exact)
            if opcode == 0x9:
                self.sock.sendall(frame(0xA, payload, os.urandom(4)))
                continue
            if opcode == 0x8:
                raise DesktopError("sandbox_error", "the browser closed the DevTools connection")
            if opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if fin:
                    return b"".join(parts).decode("utf-8", "replace")

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


# ------------------------------------------------------------------------------------------------ DevTools


def http_json(port: int, path: str, method: str = "GET", timeout: float = 5.0):
    """A DevTools HTTP endpoint's JSON answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path)
        return json.loads(conn.getresponse().read() or b"null")
    finally:
        conn.close()


class CDP:
    """One DevTools session on the first page target."""

    def __init__(self, port: int, timeout: float = 30.0):
        # The operation's own limit, not a short fixed one: a Chromium just started in an emulated VM on a loaded
        # host can take longer than a few seconds to list its targets.
        pages = [t for t in http_json(port, "/json/list", timeout=timeout) if t.get("type") == "page"]
        if not pages:
            pages = [http_json(port, "/json/new?about:blank", method="PUT", timeout=timeout)]
        self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"], timeout)
        self.timeout, self.next_id, self.events = timeout, 0, []
        self.call("Page.enable")  # page lifecycle events: a navigation an input starts is seen (wait_navigation)
        self.call("Page.bringToFront")  # activate the window: else the first click after a start may not focus

    def call(self, method: str, **params):
        """Send a command and return its result (events seen meanwhile are kept in self.events)."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise DesktopError("sandbox_error", f"{method}: {msg['error'].get('message', msg['error'])}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def pump(self, seconds: float, until: tuple[str, ...] = ()) -> bool:
        """Collect events for up to `seconds`, or until one named in `until` arrives (then True). Whole messages are
        read only once the socket is readable, so a deadline never cuts a frame in half."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([self.ws.sock], [], [], left)[0]:
                break
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] in until:
                    return True
        return False

    def wait_navigation(self, timeout: float, started: bool = False) -> None:
        """If a navigation has started (or starts within a short window after an input), wait for its load event."""
        begun = ("Page.frameStartedLoading", "Page.frameRequestedNavigation", "Page.frameScheduledNavigation")
        started = started or any(e["method"] in begun for e in self.events)
        if not started:
            started = self.pump(0.3, until=begun)
        if started and not any(e["method"] == "Page.loadEventFired" for e in self.events):
            self.pump(timeout, until=("Page.loadEventFired",))

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            detail = r["exceptionDetails"]
            text = detail.get("exception", {}).get("description") or detail.get("text")
            raise DesktopError("invalid_arguments", f"the page raised: {text}")
        return r.get("result", {}).get("value")

    def settle(self, timeout: float = 15.0) -> None:
        """Wait until the document has loaded (readyState complete) and two animation frames have been drawn."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.evaluate("document.readyState") == "complete":
                    break
            except DesktopError:
                pass  # the context was replaced by a navigation; ask again
            time.sleep(0.05)
        else:
            raise DesktopError("timeout", f"the page did not finish loading within {timeout:g} s")
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))")

    def close(self) -> None:
        """Close the session."""
        self.ws.close()


# ------------------------------------------------------------------------------------------------ desktop processes


def cdp_ready(port: int) -> bool:
    """True if Chromium answers on its DevTools port."""
    try:
        return "Browser" in (http_json(port, "/json/version", timeout=1.0) or {})
    except (OSError, ValueError, http.client.HTTPException):
        return False


def x_alive(socket_path: str) -> bool:
    """True if an X server accepts connections on its Unix socket (a socket file left by a killed one does not)."""
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(socket_path)
            return True
        except OSError:
            return False


def _clear_stale(display: str, socket_path: str) -> None:
    """Remove what a killed desktop left: the X socket and lock file, Chromium's profile singleton locks."""
    stale = [socket_path, f"/tmp/.X{display.lstrip(':')}-lock"]
    stale += [f"{STATE}/profile/{n}" for n in ("SingletonLock", "SingletonSocket", "SingletonCookie")]
    for path in stale:
        if os.path.lexists(path):
            os.unlink(path)


def _spawn(argv: list[str], log: str, env: dict) -> int:
    """Start a detached process (own session, output to log); its pid."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, close_fds=True).pid


def _wait(what: str, ready, timeout: float, log: str) -> None:
    """Poll ready() until it holds; DesktopError with the log's tail when it does not in time."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            tail = open(log, errors="replace").read()[-1500:] if os.path.exists(log) else "(no log)"
            raise DesktopError("sandbox_error", f"{what} did not start within {timeout:g} s; {log}:\n{tail}")
        time.sleep(0.1)


def chromium_argv(d: dict) -> list[str]:
    """Chromium's command line (see docs/env.md, Desktop, for why --no-sandbox)."""
    return [d["chromium"], "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-features=Translate,MediaRouter,OptimizationHints", "--password-store=basic",
            "--force-device-scale-factor=1", "--kiosk", "--window-position=0,0",
            f"--window-size={d['width']},{d['height']}", f"--user-data-dir={STATE}/profile",
            "--remote-debugging-address=127.0.0.1", f"--remote-debugging-port={d['port']}", "about:blank"]


def start(d: dict) -> dict:
    """Start Xvfb, the window manager and Chromium unless Chromium already answers; what was started."""
    if cdp_ready(d["port"]):
        return {"started": False}
    os.makedirs(STATE, exist_ok=True)
    display = d["display"]
    env = {**os.environ, "DISPLAY": display, "HOME": os.environ.get("HOME") or "/root"}
    socket_path = f"/tmp/.X11-unix/X{display.lstrip(':')}"
    pids = {}
    if not x_alive(socket_path):
        _clear_stale(display, socket_path)
        pids["xvfb"] = _spawn(["Xvfb", display, "-screen", "0", f"{d['width']}x{d['height']}x24", "-nolisten",
                               "tcp", "-ac"], f"{STATE}/xvfb.log", env)
        _wait("Xvfb", lambda: x_alive(socket_path), d["timeout_s"], f"{STATE}/xvfb.log")
    if d.get("window_manager"):
        pids["openbox"] = _spawn([d["window_manager"]], f"{STATE}/wm.log", env)
    pids["chromium"] = _spawn(chromium_argv(d), f"{STATE}/chromium.log", env)
    _wait("Chromium", lambda: cdp_ready(d["port"]), d["timeout_s"], f"{STATE}/chromium.log")
    with open(f"{STATE}/pids.json", "w") as f:
        json.dump(pids, f)
    return {"started": True, "pids": pids}


# ------------------------------------------------------------------------------------------------ operations


def page_state(cdp: CDP, max_chars: int) -> dict:
    """The page's url, title and visible text (innerText; at most max_chars, the rest marked)."""
    got = cdp.evaluate("({url: location.href, title: document.title, "
                       "text: document.body ? document.body.innerText : ''})")
    text = got["text"]
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[... {len(got['text']) - max_chars} more characters of page text]"
    return {"url": got["url"], "title": got["title"], "text": text}


def op_open(cdp: CDP, a: dict, d: dict) -> dict:
    """Navigate to a URL and wait for it to load."""
    cdp.events.clear()
    r = cdp.call("Page.navigate", url=a["url"])
    if r.get("errorText"):
        raise DesktopError("os_error", f"cannot open {a['url']}: {r['errorText']}")
    cdp.wait_navigation(d["timeout_s"], started="loaderId" in r)  # no loaderId: a same-document navigation
    cdp.settle(d["timeout_s"])
    return page_state(cdp, d["max_chars"])


def _center(cdp: CDP, selector: str) -> dict:
    """The viewport point at the middle of the element a CSS selector names (scrolled into view)."""
    js = ("(() => { const el = document.querySelector(%s); if (!el) return null; "
          "el.scrollIntoView({block: 'center', inline: 'center'}); const r = el.getBoundingClientRect(); "
          "return {x: r.left + r.width / 2, y: r.top + r.height / 2, w: r.width, h: r.height, "
          "tag: el.tagName.toLowerCase()}; })()") % json.dumps(selector)
    try:
        box = cdp.evaluate(js)
    except DesktopError as e:
        raise DesktopError("invalid_arguments", f"selector {selector!r}: {e}") from None
    if box is None:
        raise DesktopError("not_found", f"no element matches the selector {selector!r}")
    if box["w"] <= 0 or box["h"] <= 0:
        raise DesktopError("not_found", f"the element {selector!r} ({box['tag']}) is not visible (empty box)")
    return box


_ARM = ("window.__composer2_down = 0; addEventListener('mousedown', () => { window.__composer2_down += 1; }, "
        "{capture: true, once: true}); 0")


def _mouse_click(cdp: CDP, x: float, y: float, within_s: float = 5.0) -> None:
    """A left click at a viewport point, as real input events (move, press, release).

    Chromium ignores input to a page for a moment after it loads (seen in the sandbox: presses sent in the first
    ~0.8 s never reach the page, the moves do), so a capturing mousedown listener tells whether the press arrived,
    and one that did not is sent again (for up to within_s): the page never sees two presses."""
    deadline = time.monotonic() + within_s
    while True:
        cdp.evaluate(_ARM)
        cdp.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        cdp.call("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left", clickCount=1)
        try:
            arrived = cdp.evaluate("window.__composer2_down")
        except DesktopError:
            arrived = 1  # the press navigated the page away: it arrived
        cdp.call("Input.dispatchMouseEvent", type="mouseReleased", x=x, y=y, button="left", clickCount=1)
        if arrived:
            return
        if time.monotonic() > deadline:
            raise DesktopError("sandbox_error", f"the page did not take a click at ({x:.0f}, {y:.0f}) within "
                                                f"{within_s:g} s")
        time.sleep(0.1)


def op_click(cdp: CDP, a: dict, d: dict) -> dict:
    """Click an element (CSS selector) or a point (x, y in screenshot pixels)."""
    if "selector" in a:
        box = _center(cdp, a["selector"])
        x, y, target = box["x"], box["y"], f"{box['tag']} {a['selector']!r}"
    else:
        x, y, target = a["x"], a["y"], "the point"
        if not (0 <= x < d["width"] and 0 <= y < d["height"]):
            raise DesktopError("out_of_range", f"({x}, {y}) is outside the {d['width']}x{d['height']} window")
    cdp.events.clear()
    _mouse_click(cdp, x, y)
    cdp.wait_navigation(d["timeout_s"])  # a click on a link or a submit button loads another page
    cdp.settle(d["timeout_s"])
    return {"clicked": target, "x": round(x, 1), "y": round(y, 1), **page_state(cdp, d["max_chars"])}


def _press_enter(cdp: CDP) -> None:
    """The Enter key, down and up (submits forms, as a user's key press does)."""
    keys = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13}
    cdp.call("Input.dispatchKeyEvent", type="keyDown", text="\r", **keys)
    cdp.call("Input.dispatchKeyEvent", type="keyUp", **keys)


def op_type(cdp: CDP, a: dict, d: dict) -> dict:
    """Type text into the element a selector names (clicked first to focus it) or into the focused element;
    each newline is an Enter key press."""
    if "selector" in a:
        box = _center(cdp, a["selector"])
        _mouse_click(cdp, box["x"], box["y"])
    cdp.events.clear()
    lines = a["text"].split("\n")
    for i, line in enumerate(lines):
        if line:
            cdp.call("Input.insertText", text=line)
        if i < len(lines) - 1:
            _press_enter(cdp)
    if len(lines) > 1:
        cdp.wait_navigation(d["timeout_s"])  # Enter may submit a form
    cdp.settle(d["timeout_s"])
    focused = cdp.evaluate("(() => { const e = document.activeElement; return e ? {tag: e.tagName.toLowerCase(), "
                           "value: 'value' in e ? String(e.value) : null} : null; })()")
    return {"typed": len(a["text"]), "focused": focused, **page_state(cdp, d["max_chars"])}


def ax_text(nodes: list[dict], max_chars: int) -> str:
    """The accessibility tree as indented text: `role "name" (value)` per node that is not ignored."""
    by_id = {n["nodeId"]: n for n in nodes}
    child_ids = {c for n in nodes for c in n.get("childIds", ())}
    roots = [n for n in nodes if n["nodeId"] not in child_ids]
    lines: list[str] = []
    stack = [(r, 0) for r in reversed(roots)]
    while stack and sum(map(len, lines)) < max_chars:
        node, depth = stack.pop()
        shown = not node.get("ignored") and (node.get("role") or {}).get("value") not in HIDDEN_ROLES
        if shown:
            role = node["role"]["value"]
            name = (node.get("name") or {}).get("value", "")
            value = (node.get("value") or {}).get("value", "")
            lines.append("  " * depth + role + (f" {json.dumps(name)}" if name else "")
                         + (f" value={json.dumps(value)}" if value not in ("", None) else ""))
        kids = [by_id[c] for c in node.get("childIds", ()) if c in by_id]
        stack.extend((k, depth + int(shown)) for k in reversed(kids))
    text = "\n".join(lines)
    return text[:max_chars] + ("\n[... accessibility tree truncated]" if stack or len(text) > max_chars else "")


def op_read(cdp: CDP, a: dict, d: dict) -> dict:
    """The page as text: its visible text, its accessibility tree, or both."""
    mode = a.get("mode", "text")
    out = page_state(cdp, d["max_chars"])
    if mode == "accessibility":
        out.pop("text")
    if mode in ("accessibility", "both"):
        out["accessibility"] = ax_text(cdp.call("Accessibility.getFullAXTree").get("nodes", []), d["max_chars"])
    return out


def op_screenshot(cdp: CDP, a: dict, d: dict) -> dict:
    """A PNG of the window's contents (exactly width x height pixels) and the page as text."""
    clip = {"x": 0, "y": 0, "width": d["width"], "height": d["height"], "scale": 1}
    shot = cdp.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=False)
    return {"png_b64": shot["data"], **page_state(cdp, d["max_chars"])}


OPS = {"open": op_open, "click": op_click, "type": op_type, "read": op_read, "screenshot": op_screenshot}


def run(op: str, payload: dict) -> dict:
    """One operation; {"ok": True, ...} or {"ok": False, "error": kind, "message": ...}."""
    d, a = payload["desktop"], payload.get("args") or {}
    try:
        started = start(d)
        if op == "start":
            return {"ok": True, **started}
        if op not in OPS:
            raise DesktopError("unknown_tool", f"unknown desktop operation {op!r}; expected start or {sorted(OPS)}")
        cdp = CDP(d["port"], d["timeout_s"])
        try:
            return {"ok": True, "restarted": started["started"], **OPS[op](cdp, a, d)}
        finally:
            cdp.close()
    except DesktopError as e:
        return {"ok": False, "error": e.kind, "message": str(e)}
    except (OSError, ValueError, KeyError, http.client.HTTPException) as e:
        return {"ok": False, "error": "sandbox_error", "message": f"{op}: {type(e).__name__}: {e}"}


def main(argv: list[str]) -> int:
    """python3 cdp.py OP ARGS_B64 OUT_PATH: run, write the result to OUT_PATH, print its size and first chunk."""
    op, args_b64, out_path = argv
    payload = json.loads(base64.b64decode(args_b64))
    data = json.dumps(run(op, payload)).encode()
    if len(data) > payload["desktop"]["chunk"]:  # the caller reads the rest from the file (and removes it)
        with open(out_path, "wb") as f:
            f.write(data)
    sys.stdout.write(f"{len(data)}\n{base64.b64encode(data[:payload['desktop']['chunk']]).decode()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
