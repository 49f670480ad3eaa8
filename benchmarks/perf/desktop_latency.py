"""Desktop latencies and memory, JSON lines: the desktop image, the desktop's start, each browser tool's latency.

    python -m benchmarks.perf.desktop_latency [--n 10] [--width 1280] [--height 800] [--backend bwrap|vm]

Rows: the image (cached build time, its layers' size on disk), `desktop_start` (Xvfb + openbox + Chromium until the
DevTools port answers, in a fresh image sandbox, over --n sandboxes), each tool's wall time per call (p50 / p99 over
--n calls on a local page served by python -m http.server inside the sandbox), the screenshot's PNG size, and the
resident memory of the desktop's processes (sum of RSS of Xvfb, openbox and every Chromium process, which counts
pages shared between Chromium's processes more than once: an upper bound). Every row names its backend. On the vm
backend (a QEMU guest per sandbox; TCG where KVM does not work) two more rows: `warm_snapshot` (memory snapshot of a
sandbox whose browser is on the page) and `warm_fork_read` (fork of that snapshot until browser_read answers from the
running browser, no desktop start), the path a branching rollout takes.
"""

import argparse
import json
import os
import subprocess
import time

from benchmarks.perf.sandbox_latency import stats as _stats
from composer2_jax.env import Environment, SandboxConfig
from composer2_jax.env.desktop import DesktopConfig, DesktopEnvironment, desktop_image
from composer2_jax.env.images import ImageBuilder

PAGE = ("<!doctype html><title>bench</title><h1>Bench</h1><input id=q> <button id=go "
        "onclick=\"out.textContent='Hello '+q.value\">Go</button><p id=out>-</p>")


BACKEND = {"value": "bwrap"}  # the backend every row names (set once by main)


def stats(name: str, samples_s: list[float], **extra) -> dict:
    """benchmarks.perf.sandbox_latency's p50 / p99 / mean row, labelled as this benchmark's."""
    return {**_stats(name, samples_s, **extra), "bench": "desktop", "backend": BACKEND["value"]}


def emit(row: dict) -> None:
    """Print one JSON line."""
    print(json.dumps({**row, "backend": BACKEND["value"]}), flush=True)


def _serve(desk: DesktopEnvironment, sid: str) -> None:
    """Write the page and serve it on 127.0.0.1:8000 inside the sandbox."""
    desk.exec(sid, f"mkdir -p /srv/b && printf '%s' '{PAGE}' > /srv/b/index.html && nohup python3 -m http.server "
                   "8000 --bind 127.0.0.1 --directory /srv/b > /tmp/http.log 2>&1 &")
    for _ in range(100):
        probe = "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))'"
        if desk.exec(sid, probe)["exit_code"] == 0:
            return
        time.sleep(0.1)
    raise RuntimeError("the page server did not start")


def _image(builder: ImageBuilder):
    """The desktop image, and its row (cached build time, layer bytes)."""
    t = time.perf_counter()
    image = desktop_image(builder)
    size = sum(int(subprocess.run(["du", "-sb", os.path.join(image.layer_root, layer)], capture_output=True,
                                  text=True, check=True).stdout.split()[0]) for layer in image.layers)
    emit({"bench": "desktop", "metric": "desktop_image", "cached": image.cached,
          "build_s": round(time.perf_counter() - t, 3), "layers": len(image.layers), "layers_bytes": size})
    return image


def _starts(desk: DesktopEnvironment, snap: str, n: int) -> str:
    """n fresh sandboxes, the desktop started in each (timed); the last one's id, left running."""
    starts, sid = [], None
    for _ in range(n):
        if sid is not None:
            desk.close(sid)
        sid = desk.fork(snap)
        t = time.perf_counter()
        desk.start(sid)
        starts.append(time.perf_counter() - t)
    emit(stats("desktop_start", starts))
    return sid


def _tools(desk: DesktopEnvironment, sid: str, n: int) -> None:
    """Each browser tool n times on the served page."""
    calls = [("browser_open", {"url": "http://127.0.0.1:8000/"}), ("browser_type", {"text": "x", "selector": "#q"}),
             ("browser_click", {"selector": "#go"}), ("browser_read", {"mode": "text"}),
             ("browser_read", {"mode": "accessibility"}), ("screenshot", {})]
    for tool, tool_args in calls:
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            obs = desk.call(sid, tool, tool_args)
            samples.append(time.perf_counter() - t)
            if not obs.ok:
                raise RuntimeError(f"{tool}: {obs.content}")
        extra = {"png_bytes": obs.fields["artifacts"][0]["bytes"]} if tool == "screenshot" else {}
        emit(stats(f"tool_{tool}" + (f"_{tool_args['mode']}" if tool == "browser_read" else ""), samples, **extra))


def _warm_forks(desk: DesktopEnvironment, sid: str, n: int) -> None:
    """vm backend: snapshot the sandbox with its browser running, then n forks each read the page (no restart)."""
    t = time.perf_counter()
    warm = desk.snapshot(sid)
    emit(stats("warm_snapshot", [time.perf_counter() - t]))
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        kid = desk.fork(warm)
        obs = desk.call(kid, "browser_read", {"mode": "text"})
        samples.append(time.perf_counter() - t)
        if not obs.ok or obs.fields.get("restarted"):
            raise RuntimeError(f"the fork's browser did not answer without a restart: {obs.content}")
        desk.close(kid)
    emit(stats("warm_fork_read", samples))


def main() -> None:
    """Print the JSON lines."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=10, help="sandboxes started and calls per tool")
    p.add_argument("--width", type=int, default=1280, help="window width")
    p.add_argument("--height", type=int, default=800, help="window height")
    p.add_argument("--backend", choices=("bwrap", "vm"), default="bwrap", help="sandbox backend")
    p.add_argument("--vm_memory_mib", type=int, default=1024, help="guest RAM per VM (vm backend)")
    args = p.parse_args()
    BACKEND["value"] = args.backend
    builder = ImageBuilder()
    image = _image(builder)
    vm = {"backend": "vm", "vm_memory_mib": args.vm_memory_mib} if args.backend == "vm" else {}
    env = Environment(config=SandboxConfig(image_pool_size=0, **vm))
    desk = DesktopEnvironment(env, DesktopConfig(width=args.width, height=args.height,
                                                 timeout_s=240.0 if vm else 60.0))
    sid = _starts(desk, env.import_image(image), args.n)
    _serve(desk, sid)
    _tools(desk, sid, args.n)
    rss = desk.exec(sid, "ps -eo rss=,comm= | grep -Ei 'xvfb|openbox|chrom' | awk '{s += $1} END {print s}'")
    emit({"bench": "desktop", "metric": "desktop_rss_bytes", "value": int(rss["stdout"]) * 1024,
          "window": f"{args.width}x{args.height}"})
    if vm:
        _warm_forks(desk, sid, args.n)
    desk.close(sid)
    env.shutdown()
    builder.close()


if __name__ == "__main__":
    main()
