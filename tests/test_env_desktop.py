"""The desktop (composer2_jax/env/desktop/): tool schemas and argument errors, the guest's WebSocket framing against
RFC 6455's own examples, the accessibility-tree text, PNG facts, screenshots kept in the episode record, and (slow)
the real thing: the desktop image built, a page served from inside the sandbox, Chromium driven to it over the
DevTools protocol, text typed, a button clicked, the page text and the screenshots checked (bubblewrap); and on a VM,
memory snapshots keeping the running browser through fork and restore.
"""

import base64
import hashlib
import importlib.util
import io
import json
import os
import shutil
import socket
import struct
import time
import zlib

import jsonschema
import pytest

from composer2_jax.bench.policies import ScriptedPolicy, call
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import testing as envtest
from composer2_jax.env.desktop import DesktopConfig, DesktopEnvironment, desktop_image, png_size
from composer2_jax.env.desktop.host import GUEST_DIR
from composer2_jax.env.harness import EpisodeResult, HarnessConfig, ToolCallRecord, run_episode, transcript_jsonl
from composer2_jax.env.observation import Observation
from composer2_jax.env.tool_schemas import (
    ALL_TOOL_NAMES,
    DESKTOP_TOOL_NAMES,
    TOOL_NAMES,
    ArgumentError,
    parse_arguments,
    tool_specs,
)
from composer2_jax.episode import Episode
from composer2_jax.rl.services.tool_view import ToolView

ON_CI = os.environ.get("CI") == "true"
_spec = importlib.util.spec_from_file_location("desktop_guest_cdp", os.path.join(GUEST_DIR, "cdp.py"))
cdp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cdp)


# ------------------------------------------------------------------------------------------------------ schemas


def test_desktop_tools_are_registered_but_offered_only_with_a_desktop():
    assert tool_specs() == tool_specs(TOOL_NAMES) and DESKTOP_TOOL_NAMES == (
        "browser_open", "browser_click", "browser_type", "browser_read", "screenshot")
    assert ALL_TOOL_NAMES == TOOL_NAMES + DESKTOP_TOOL_NAMES
    for spec in tool_specs(DESKTOP_TOOL_NAMES):
        params = spec["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert spec["type"] == "function" and spec["function"]["description"]
        assert params["additionalProperties"] is False
    names = [s["function"]["name"] for s in DesktopEnvironment(_StubEnv()).tools()]
    assert names == list(TOOL_NAMES) + list(DESKTOP_TOOL_NAMES)
    with pytest.raises(ArgumentError, match="unknown tool 'browser_open'"):
        parse_arguments("browser_open", {"url": "http://x/"})  # not a coding tool
    assert parse_arguments("browser_open", '{"url": "http://x/"}', names=DESKTOP_TOOL_NAMES) == {"url": "http://x/"}
    with pytest.raises(ValueError, match="unknown tools \\['nope'\\]"):
        tool_specs(("nope",))
    view = ToolView(DesktopEnvironment(_StubEnv()), names=("screenshot", "read_file"))  # an RL setup's subset
    assert [s["function"]["name"] for s in view.tools()] == ["read_file", "screenshot"]
    assert view.call("sbx-1", "browser_open", {"url": "http://x/"}).error == "unknown_tool"
    with pytest.raises(ValueError, match="DesktopConfig.width=0"):
        DesktopConfig(width=0)
    with pytest.raises(ValueError, match="DesktopConfig.display='99'"):
        DesktopConfig(display="99")


class _StubEnv:
    """The environment surface DesktopEnvironment uses; exec answers from a script and every call is recorded."""

    def __init__(self, replies=()):
        self.replies, self.execs, self.calls, self.puts = list(replies), [], [], []

    @staticmethod
    def tools():
        return tool_specs()

    def call(self, sid, tool, args=None):
        self.calls.append((sid, tool, args))
        return Observation(True, f"env ran {tool}")

    def episode(self, sid):
        if sid != "sbx-1":
            raise KeyError(f"no live sandbox {sid!r}")
        return {"submitted": False}

    def put_dir(self, sid, src, dest, user=None):
        self.puts.append((src, dest))

    def exec(self, sid, command, timeout_s=None):
        self.execs.append(command)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def _guest_reply(result: dict, chunk: int = 20_000) -> dict:
    """What the guest's exec prints for a result (size, then base64 of the first chunk)."""
    data = json.dumps(result).encode()
    return {"exit_code": 0, "stdout": f"{len(data)}\n{base64.b64encode(data[:chunk]).decode()}", "stdout_tail": ""}


@pytest.mark.parametrize("tool,args,kind,words", [
    ("browser_open", '{"url": ', "bad_json", "not valid JSON"),
    ("browser_open", [1, 2], "bad_json", "must be a JSON object"),
    ("browser_open", {}, "invalid_arguments", "'url' is a required property"),
    ("browser_open", {"url": "javascript:alert(1)"}, "invalid_arguments", "does not match"),
    ("browser_click", {}, "invalid_arguments", "either selector or both x and y; got no arguments"),
    ("browser_click", {"x": 3}, "invalid_arguments", "either selector or both x and y; got ['x']"),
    ("browser_click", {"selector": "#a", "x": 1, "y": 2}, "invalid_arguments", "got ['selector', 'x', 'y']"),
    ("browser_click", {"x": -1, "y": 2}, "invalid_arguments", "less than the minimum"),
    ("browser_click", {"selector": ""}, "invalid_arguments", "should be non-empty"),
    ("browser_type", {"selector": "#a"}, "invalid_arguments", "'text' is a required property"),
    ("browser_type", {"text": 5}, "invalid_arguments", "is not of type 'string'"),
    ("browser_read", {"mode": "pixels"}, "invalid_arguments", "is not one of"),
    ("screenshot", {"full_page": True}, "invalid_arguments", "Additional properties"),
])
def test_malformed_desktop_arguments_are_tool_errors_that_never_reach_the_sandbox(tool, args, kind, words):
    env = _StubEnv()
    obs = DesktopEnvironment(env).call("sbx-1", tool, args)
    assert not obs.ok and obs.error == kind and words in obs.content, obs.content
    assert env.execs == [] and env.calls == []


def test_desktop_failures_come_back_as_observations():
    env = _StubEnv([_guest_reply({"ok": False, "error": "not_found", "message": "no element matches '#x'"}),
                    {"exit_code": 1, "stdout": "", "stderr": "python3: not found", "stdout_tail": ""},
                    RuntimeError("sandbox died"),
                    _guest_reply({"ok": False, "error": "weird_kind", "message": "?"})])
    desk = DesktopEnvironment(env)
    obs = desk.call("sbx-1", "browser_click", {"selector": "#x"})
    assert (obs.error, obs.content) == ("not_found", "error (not_found): browser_click: no element matches '#x'")
    obs = desk.call("sbx-1", "browser_read", {})
    assert obs.error == "sandbox_error" and "exit 1" in obs.content and "python3: not found" in obs.content
    died = desk.call("sbx-1", "screenshot", {})
    assert died.content == "error (sandbox_error): screenshot: RuntimeError: sandbox died"
    assert desk.call("sbx-1", "browser_read", {}).error == "sandbox_error"  # an unknown kind is not passed on
    assert desk.call("sbx-9", "browser_read", {}).error == "unknown_sandbox"
    assert desk.call("sbx-1", "read_file", {"path": "a"}).content == "env ran read_file"  # other tools: the env's


def test_the_guest_is_copied_in_when_missing_and_long_results_are_read_in_chunks():
    page = {"ok": True, "url": "http://127.0.0.1:8000/", "title": "T", "text": "word " * 3000}
    data = json.dumps(page).encode()
    chunk = 4096
    rest = [{"exit_code": 0, "stdout": base64.b64encode(data[i:i + chunk]).decode(), "stdout_tail": ""}
            for i in range(chunk, len(data), chunk)]
    env = _StubEnv([{"exit_code": 97, "stdout": "", "stdout_tail": ""}, _guest_reply(page, chunk), *rest])
    obs = DesktopEnvironment(env, DesktopConfig(chunk=chunk)).call("sbx-1", "browser_read", {"mode": "text"})
    assert obs.ok and obs.fields["text"] == page["text"] and obs.content.endswith(page["text"])
    assert env.puts == [(GUEST_DIR, "/tmp/.composer2-desktop-guest")]
    assert len(env.execs) == 2 + len(rest) and len(rest) == (len(data) - 1) // chunk
    assert f" {chunk} {chunk}" in env.execs[2] and env.execs[-1].endswith(f" {chunk * len(rest)} {chunk}")


# ------------------------------------------------------------------------------------------------------ guest parts


def test_websocket_frames_match_rfc6455_examples():
    # RFC 6455 section 5.7: a masked "Hello" with mask 37 fa 21 3d
    assert cdp.frame(0x1, b"Hello", bytes.fromhex("37fa213d")) == bytes.fromhex("818537fa213d7f9f4d5158")
    big = bytes(range(256)) * 300
    for payload, head in ((b"x" * 200, b"\x82\xfe\x00\xc8"), (big, b"\x82\xff" + struct.pack("!Q", len(big)))):
        raw = cdp.frame(0x2, payload, b"\0\0\0\0")
        assert raw[:len(head)] == head and raw[len(head) + 4:] == payload  # a zero mask leaves the payload as is
    examples = [bytes.fromhex("810548656c6c6f"),  # unmasked single-frame "Hello"
                bytes.fromhex("818537fa213d7f9f4d5158"),  # masked "Hello"
                bytes.fromhex("827e0100") + bytes(256),  # 256 bytes binary, 16-bit length
                bytes.fromhex("827f0000000000010000") + bytes(65536)]  # 64 KiB binary, 64-bit length
    expected = [(True, 1, b"Hello"), (True, 1, b"Hello"), (True, 2, bytes(256)), (True, 2, bytes(65536))]
    for raw, want in zip(examples, expected):
        buf = io.BytesIO(raw)
        assert cdp.read_frame(buf.read) == want


def test_websocket_recv_joins_fragments_and_answers_a_ping_between_them():
    a, b = socket.socketpair()
    ws = cdp.WebSocket.__new__(cdp.WebSocket)
    ws.sock = a
    try:  # RFC 6455 5.7: fragmented "Hel" + "lo", with a ping ("Hello") in between
        b.sendall(bytes.fromhex("010348656c") + bytes.fromhex("890548656c6c6f") + bytes.fromhex("80026c6f"))
        assert ws.recv() == "Hello"
        pong = b.recv(64)
        assert pong[0] == 0x8A and pong[1] == 0x80 | 5  # FIN + pong, masked, 5 bytes
        mask = pong[2:6]
        assert bytes(x ^ mask[i % 4] for i, x in enumerate(pong[6:])) == b"Hello"
        ws.send('{"id": 1}')
        sent = b.recv(64)
        assert sent[0] == 0x81 and bytes(x ^ sent[2:6][i % 4] for i, x in enumerate(sent[6:])) == b'{"id": 1}'
    finally:
        a.close()
        b.close()


def test_accessibility_tree_text_skips_ignored_and_generic_nodes():
    nodes = [{"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "Page"}, "childIds": ["2", "5"]},
             {"nodeId": "2", "role": {"value": "generic"}, "childIds": ["3", "4"]},
             {"nodeId": "3", "role": {"value": "button"}, "name": {"value": "Go"}, "childIds": ["6"]},
             {"nodeId": "4", "role": {"value": "textbox"}, "value": {"value": "abc"}, "ignored": False},
             {"nodeId": "5", "role": {"value": "heading"}, "ignored": True, "childIds": ["7"]},
             {"nodeId": "6", "role": {"value": "InlineTextBox"}, "name": {"value": "Go"}},
             {"nodeId": "7", "role": {"value": "StaticText"}, "name": {"value": "Title \"x\""}}]
    assert cdp.ax_text(nodes, 10_000) == ('RootWebArea "Page"\n  button "Go"\n  textbox value="abc"\n'
                                         '  StaticText "Title \\"x\\""')
    assert cdp.ax_text(nodes, 20).endswith("[... accessibility tree truncated]")


def _png(width: int, height: int) -> bytes:
    """A grey RGB PNG, written by hand (signature, IHDR, IDAT, IEND)."""
    def chunk(kind, body):
        return struct.pack("!I", len(body)) + kind + body + struct.pack("!I", zlib.crc32(kind + body))
    rows = b"".join(b"\0" + b"\x80" * 3 * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack("!IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def test_png_size_reads_ihdr_and_refuses_other_bytes():
    assert png_size(_png(37, 5)) == (37, 5)
    with pytest.raises(ValueError, match="not a PNG"):
        png_size(b"GIF89a" + bytes(30))


def test_screenshots_are_kept_in_the_episode_record(tmp_path):
    png = _png(4, 3)
    artifact = {"kind": "screenshot", "mime": "image/png", "name": "screenshot-s-1.png", "width": 4, "height": 3,
                "bytes": len(png), "sha256": hashlib.sha256(png).hexdigest(),
                "data_b64": base64.b64encode(png).decode()}
    env = _StubEnv([_guest_reply({"ok": True, "url": "about:blank", "title": "", "text": "",
                                  "png_b64": artifact["data_b64"]})])
    desk = DesktopEnvironment(env)
    config = HarnessConfig(max_turns=3)
    result = run_episode(desk, "sbx-1", "Look at the page.", ScriptedPolicy(tk.ByteTokenizer(), [
        call("screenshot"), call("submit", summary="seen")], config), tk.ByteTokenizer(), config)
    (record, _) = result.tool_calls
    assert record.name == "screenshot" and record.artifacts == ({**artifact, "name": "screenshot-sbx-1-1.png"},)
    assert result.artifacts == [{**record.artifacts[0], "turn": 1}]
    (path,) = result.save_artifacts(tmp_path / "shots")
    assert path.endswith("screenshot-sbx-1-1.png") and open(path, "rb").read() == png
    lines = [json.loads(x) for x in transcript_jsonl(result).splitlines()]
    kept = [x["tool_call_record"]["artifacts"] for x in lines if "tool_call_record" in x][0]
    assert kept == [{k: v for k, v in record.artifacts[0].items() if k != "data_b64"}]  # the bytes stay out
    assert "4x3 PNG" in [m for m in result.messages if m["role"] == "tool"][0]["content"]
    empty = EpisodeResult(Episode(()), [], "submitted", 0, [ToolCallRecord(0, "x", {}, True, None, False, "")],
                          0, 0, 0, 0, 0.0, True)
    assert empty.artifacts == [] and empty.save_artifacts(tmp_path / "none") == []


# ------------------------------------------------------------------------------------------------- the real desktop


def _problem(backend: str) -> str | None:
    """Why this host cannot build and run the desktop image on `backend` (None if it can)."""
    needed = ("podman", "debootstrap") + (("qemu-system-x86_64", "qemu-img", "busybox", "mkfs.ext4", "cpio")
                                          if backend == "vm" else ())
    missing = [b for b in needed if shutil.which(b) is None]
    return envtest.host_problem() or (f"{', '.join(missing)} not installed (tests/run.sh installs them)"
                                      if missing else None)


PAGE = """<!doctype html>
<html><head><title>Greeting form</title>
<style>body { margin: 0; background: #ffffff; font: 16px sans-serif; }
#banner { display: none; width: 400px; height: 200px; background: rgb(200, 30, 40); }</style></head>
<body><h1>Greeting form</h1><input id="name" placeholder="your name"> <button id="go">Greet</button>
<div id="banner"></div><p id="out">nobody greeted yet</p><a id="next" href="/second.html">next page</a>
<script>
document.getElementById("go").onclick = () => {
  const name = document.getElementById("name").value;
  document.getElementById("out").textContent = "Hello, " + name + "!";
  document.getElementById("banner").style.display = "block";
  document.title = "Greeted " + name;
};
</script></body></html>
"""
SECOND = ('<!doctype html><title>Second</title><form action="/third.html"><input id="q" name="q" '
          'aria-label="query"></form>')
THIRD = "<!doctype html><title>Third</title><p>Third page</p>"


def _colors(artifact: dict):
    """(the PNG's bytes, {RGB colour: pixel count}) after checking signature and IHDR by hand."""
    from PIL import Image  # Pillow (a dependency of matplotlib, requirements.txt) decodes, independently of us

    data = base64.b64decode(artifact["data_b64"])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert struct.unpack("!II", data[16:24]) == (artifact["width"], artifact["height"])
    counts = Image.open(io.BytesIO(data)).convert("RGB").getcolors(maxcolors=1 << 24)
    return data, {color: n for n, color in counts}


def _serve_site(desk, sid) -> None:
    """Serve PAGE, SECOND and THIRD on 127.0.0.1:8000 from a process inside the sandbox; wait until it listens."""
    desk.exec(sid, f"mkdir -p /srv/site && cat > /srv/site/index.html <<'EOF'\n{PAGE}EOF\n"
                   f"echo '{SECOND}' > /srv/site/second.html && echo '{THIRD}' > /srv/site/third.html && "
                   "nohup python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/site > /tmp/http.log 2>&1 &")
    probe = "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))'"
    for _ in range(300):
        if desk.exec(sid, probe)["exit_code"] == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"the page server did not listen: {desk.exec(sid, 'cat /tmp/http.log')['stdout']}")


@pytest.fixture(scope="module")
def desktop(request):
    """(DesktopEnvironment, the desktop image's snapshot, DesktopConfig) on bubblewrap, or on the backend a test
    names with `@pytest.mark.parametrize("desktop", ["vm"], indirect=True)` (the same tools; a VM runs under TCG
    here: slower, same results)."""
    backend = getattr(request, "param", "bwrap")
    problem = _problem(backend)
    if problem is not None:
        if ON_CI:
            pytest.fail(f"CI=true but the desktop image cannot run on the {backend} backend here: {problem}")
        pytest.skip(problem)
    from composer2_jax.env import Environment, SandboxConfig
    from composer2_jax.env.images import ImageBuilder

    builder = ImageBuilder()
    image = desktop_image(builder)  # cached per machine in $COMPOSER2_IMAGE_CACHE after the first build
    # A VM needs room for Chromium in its own RAM; under TCG the desktop's first start takes about a minute.
    settings = {"backend": "vm", "vm_memory_mib": 1024} if backend == "vm" else {}
    env = Environment(config=SandboxConfig(image_pool_size=0, **settings))
    config = DesktopConfig(width=1024, height=640, timeout_s=240.0 if backend == "vm" else 60.0)
    yield DesktopEnvironment(env, config), env.import_image(image), config
    env.shutdown()
    builder.close()


@pytest.mark.slow
def test_browser_drives_a_page_served_inside_the_sandbox(desktop):
    desk, snap, config = desktop
    sid = desk.fork(snap)
    have = desk.exec(sid, "for b in Xvfb openbox chromium python3; do command -v $b >/dev/null || echo $b; done")
    assert have["exit_code"] == 0 and have["stdout"] == "", f"the desktop image lacks {have['stdout'].split()}"
    _serve_site(desk, sid)
    obs = desk.call(sid, "browser_open", {"url": "http://127.0.0.1:8000/"})
    assert obs.ok, obs.content
    assert obs.fields["title"] == "Greeting form" and "nobody greeted yet" in obs.fields["text"]
    assert "(the desktop was not running and was started" in obs.content  # the first call starts it
    before = desk.call(sid, "screenshot", {})
    assert before.ok and "nobody greeted yet" in before.content  # the text rendering for text-only models
    obs = desk.call(sid, "browser_type", {"text": "desktop tester", "selector": "#name"})
    assert obs.ok and obs.fields["focused"] == {"tag": "input", "value": "desktop tester"}, obs.content
    obs = desk.call(sid, "browser_click", {"selector": "#go"})
    assert obs.ok and obs.fields["title"] == "Greeted desktop tester", obs.content
    assert "Hello, desktop tester!" in obs.fields["text"] and "nobody greeted yet" not in obs.fields["text"]
    tree = desk.call(sid, "browser_read", {"mode": "accessibility"})
    assert tree.ok and 'button "Greet"' in tree.content and 'textbox "your name" value="desktop tester"' in tree.content
    after = desk.call(sid, "screenshot", {})
    assert after.ok and "Hello, desktop tester!" in after.content
    red = (200, 30, 40)
    for obs, banner in ((before, False), (after, True)):
        (artifact,) = obs.fields["artifacts"]
        assert (artifact["width"], artifact["height"]) == (config.width, config.height)
        data, colors = _colors(artifact)
        assert artifact["bytes"] == len(data) and artifact["sha256"] == hashlib.sha256(data).hexdigest()
        assert sum(colors.values()) == config.width * config.height
        assert len(colors) > 2  # not a uniform image: text, an input box, a button
        reds = colors.get(red, 0)
        assert (reds >= 0.9 * 400 * 200) if banner else reds == 0, reds  # the banner the click showed
    assert "GET / HTTP/1.1\" 200" in desk.exec(sid, "cat /tmp/http.log")["stdout"]  # served from inside
    point = desk.call(sid, "browser_click", {"x": config.width + 5, "y": 1})
    assert point.error == "out_of_range" and f"{config.width}x{config.height}" in point.content
    assert desk.call(sid, "browser_click", {"selector": "#missing"}).error == "not_found"
    assert desk.call(sid, "browser_open", {"url": "http://127.0.0.1:9/"}).error == "os_error"  # nothing listens
    assert desk.call(sid, "browser_open", {"url": "http://127.0.0.1:8000/"}).ok
    obs = desk.call(sid, "browser_click", {"selector": "#next"})  # a link: the click waits for the new page
    assert obs.ok and obs.fields["title"] == "Second" and obs.fields["url"].endswith("/second.html"), obs.content
    obs = desk.call(sid, "browser_type", {"text": "hi\n", "selector": "#q"})  # Enter submits the form
    assert obs.ok and obs.fields["url"].endswith("/third.html?q=hi") and obs.fields["text"] == "Third page", obs.content
    desk.close(sid)


@pytest.mark.slow
def test_the_harness_offers_the_desktop_tools_and_keeps_the_screenshot(desktop, tmp_path):
    desk, snap, config = desktop
    sid = desk.fork(snap)
    tok = tk.ByteTokenizer()
    harness = HarnessConfig(max_turns=4, context_budget=60_000, max_total_tokens=100_000)
    policy = ScriptedPolicy(tok, [call("browser_open", url="data:text/html,<h1>Shot</h1>"), call("screenshot"),
                                  call("submit", summary="looked")], harness)
    prompts = []
    generate = policy.generate
    policy.generate = lambda ids, n: prompts.append(tok.decode(ids)) or generate(ids, n)
    result = run_episode(desk, sid, "Open the page and take a screenshot.", policy, tok, harness)
    assert result.stop_reason == "submitted" and [r.ok for r in result.tool_calls] == [True, True, True]
    assert all(f'"{name}"' in prompts[0] for name in DESKTOP_TOOL_NAMES)  # schemas in the system prompt
    (shot,) = result.artifacts
    assert (shot["turn"], shot["width"], shot["height"]) == (2, config.width, config.height)
    (path,) = result.save_artifacts(tmp_path)
    data = open(path, "rb").read()
    assert png_size(data) == (config.width, config.height) and hashlib.sha256(data).hexdigest() == shot["sha256"]
    tool_msgs = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert "PNG" in tool_msgs[1] and "Shot" in tool_msgs[1]  # the text rendering the model read
    desk.close(sid)


def _chromium(desk, sid) -> tuple[str, str]:
    """(pid, start time in clock ticks since boot) of the oldest Chromium process in the sandbox."""
    out = desk.exec(sid, "pid=$(pgrep -o -x chromium) && echo $pid $(cut -d')' -f2 /proc/$pid/stat | "
                         "awk '{print $20}')")
    assert out["exit_code"] == 0, out
    pid, ticks = out["stdout"].split()
    return pid, ticks


@pytest.mark.slow
def test_the_desktop_comes_back_after_a_files_only_snapshot_and_reads_in_chunks(desktop):
    desk, snap, config = desktop
    sid = desk.fork(snap)
    assert desk.start(sid)["started"] and not desk.start(sid)["started"]  # started once
    long_page = "data:text/html," + "<p>" + "lorem ipsum " * 3000 + "</p>"
    assert desk.call(sid, "browser_open", {"url": long_page}).ok
    desk.snapshot(sid)  # stops the sandbox's processes (bubblewrap snapshots are of files)
    small = DesktopEnvironment(desk.env, DesktopConfig(width=config.width, height=config.height, chunk=4096))
    obs = small.call(sid, "browser_read", {})
    assert obs.ok and obs.fields["restarted"] and obs.fields["url"] == "about:blank"
    obs = small.call(sid, "browser_open", {"url": long_page})
    assert obs.ok and obs.fields["text"].count("lorem ipsum") >= 1600  # 20,000 characters, read 4 KiB at a time
    assert obs.fields["text"].endswith("more characters of page text]")
    shot = small.call(sid, "screenshot", {})
    assert shot.ok and shot.fields["artifacts"][0]["width"] == config.width
    desk.close(sid)


@pytest.mark.slow
@pytest.mark.parametrize("desktop", ["vm"], indirect=True)  # bubblewrap snapshots hold files only (test above)
def test_vm_forks_of_a_warm_desktop_each_have_the_running_browser_and_diverge(desktop):
    """What only memory snapshots give: a browser on a page with typed-in state, forked twice; each fork has the
    same Chromium process (no restart) with the typed text still in the field; the forks then navigate apart,
    and a restore brings the original page and its state back."""
    desk, snap, config = desktop
    sid = desk.fork(snap)
    _serve_site(desk, sid)
    assert desk.call(sid, "browser_open", {"url": "http://127.0.0.1:8000/"}).ok
    assert desk.call(sid, "browser_type", {"text": "forked state", "selector": "#name"}).ok
    browser = _chromium(desk, sid)
    warm = desk.snapshot(sid)
    kids = [desk.fork(warm) for _ in range(2)]
    for kid in kids:
        tree = desk.call(kid, "browser_read", {"mode": "accessibility"})
        assert tree.ok and not tree.fields.get("restarted"), tree.content
        assert 'textbox "your name" value="forked state"' in tree.content  # typed before the snapshot
        assert _chromium(desk, kid) == browser  # the same process, not a new one
    clicked = desk.call(kids[0], "browser_click", {"selector": "#go"})
    assert clicked.ok and clicked.fields["title"] == "Greeted forked state", clicked.content
    shot = desk.call(kids[0], "screenshot", {})
    assert shot.ok and "Hello, forked state!" in shot.content
    (artifact,) = shot.fields["artifacts"]
    assert (artifact["width"], artifact["height"]) == (config.width, config.height)
    _, colors = _colors(artifact)
    assert colors.get((200, 30, 40), 0) >= 0.9 * 400 * 200  # the banner the click showed, rendered in the VM
    moved = desk.call(kids[1], "browser_open", {"url": "http://127.0.0.1:8000/third.html"})
    assert moved.ok and moved.fields["text"] == "Third page"
    assert "nobody greeted yet" in desk.call(sid, "browser_read", {}).fields["text"]  # the parent is untouched
    assert desk.call(kids[0], "browser_read", {}).fields["title"] == "Greeted forked state"  # the forks diverged
    desk.restore(kids[1], warm)
    back = desk.call(kids[1], "browser_read", {"mode": "both"})
    assert back.ok and not back.fields.get("restarted") and back.fields["url"] == "http://127.0.0.1:8000/"
    assert 'value="forked state"' in back.content and _chromium(desk, kids[1]) == browser
    for s in (*kids, sid):
        desk.close(s)
