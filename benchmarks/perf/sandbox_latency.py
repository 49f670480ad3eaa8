"""Sandbox latencies and capacity, JSON lines: create, snapshot, fork, tool-call overhead, concurrent sandboxes.

    python -m benchmarks.perf.sandbox_latency [--n 40] [--max-sandboxes 128] [--big-files 2000] [--no-images]

Goals (docs/design.md): fork <= 20 ms, >= 64 concurrent sandboxes on a 2-core machine, tool-call overhead <= 5 ms;
image sandboxes: fork <= 20 ms p50, first start of a cached image <= 100 ms.
Image rows (metric names starting with "image_") use tests/data/harbor/apt-pytest's image (ubuntu:24.04 + python3,
pip, pytest; built once and cached): a cached build, the first start of the cached image in a running environment (no
warm pool: import_image, then bwrap, the 65536-id user namespace, the root overlay and the guest, all in the
call), fork from its snapshot with a warm pool, fork of a live image sandbox, snapshot, and the same tool-call
overhead as the workspace rows.
fork is measured with the warm pool (started sandboxes waiting for a workspace: a fork only mounts) in bursts
of --pool (the pool refills between bursts, as between rollout groups), and cold (no pool: namespaces,
bwrap and the guest's interpreter start inside the call). Tool-call overhead is run_terminal_cmd('true')
minus the same `sh -c true` fork/exec timed on the host right before it (paired samples), and read_file of a
small file (no process at all).
fork cost against repository size is shown by forking a small and a --big-files repository.
Episode checkpoints (issue 18): a scripted harness episode of --turns turns (each writes a file and runs a command)
with `checkpoints=True`: the cost of each turn's checkpoint (snapshot of the sandbox + copy of the harness state),
and the episode's wall time with and without checkpoints (--only-checkpoints runs just these rows).
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

from composer2_jax.env import Environment, SandboxConfig, SandboxLimits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE_CONTEXT = os.path.join(ROOT, "tests", "data", "harbor", "apt-pytest", "environment")


def stats(name: str, samples_s: list[float], goal_ms: float | None = None, **extra) -> dict:
    """p50 / p99 / mean in ms of a list of seconds, with the goal and whether p50 meets it."""
    ms = sorted(s * 1000 for s in samples_s)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    row = {"bench": "sandbox", "metric": name, "n": len(ms), "p50_ms": round(statistics.median(ms), 3),
           "p99_ms": round(p99, 3), "mean_ms": round(statistics.fmean(ms), 3), **extra}
    if goal_ms is not None:
        row.update(goal_ms=goal_ms, meets_goal=row["p50_ms"] <= goal_ms)
    return row


def timed(fn, *args):
    """(seconds, result) of one call."""
    t = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t, result


def make_repo(root: str, files: int, size: int) -> str:
    """A repository of `files` files of `size` bytes in 10 directories."""
    for i in range(files):
        path = os.path.join(root, f"d{i % 10}", f"f{i}.py")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f"# file {i}\n" + "x = 1\n" * (size // 6))
    return root


def wait_for_pool(env: Environment, size: int, timeout_s: float = 30.0) -> None:
    """Block until the warm pool is full again."""
    deadline = time.monotonic() + timeout_s
    while env.pool.ready() < size and time.monotonic() < deadline:
        time.sleep(0.01)


def bench_latencies(env: Environment, repo: str, n: int, pool: int) -> list[dict]:
    """create, snapshot, warm fork and tool-call latencies."""
    rows = []
    creates, snaps, forks, fork_live, closes = [], [], [], [], []
    for _ in range(max(4, n // 4)):
        wait_for_pool(env, pool)
        dt, sid = timed(env.create, repo)
        creates.append(dt)
        closes.append(timed(env.close, sid)[0])
    rows.append(stats("create_from_repo", creates, repo_files=len(os.listdir(repo))))
    base = env.create(repo)
    for i in range(n):
        env.call(base, "write_file", {"path": f"step{i}.txt", "content": str(i)})
        snaps.append(timed(env.snapshot, base)[0])
    snap = env.snapshot(base)
    while len(forks) < n:
        wait_for_pool(env, pool)
        kids = []
        for _ in range(min(pool, n - len(forks))):
            dt, kid = timed(env.fork, snap)
            forks.append(dt)
            kids.append(kid)
        for kid in kids:
            env.close(kid)
    for _ in range(max(4, n // 4)):
        wait_for_pool(env, pool)
        env.call(base, "write_file", {"path": "live.txt", "content": "x"})
        dt, kid = timed(env.fork, base)  # snapshot of the live sandbox + fork
        fork_live.append(dt)
        env.close(kid)
    rows.append(stats("snapshot_small_delta", snaps))
    rows.append(stats("fork_from_snapshot_warm_pool", forks, goal_ms=20.0, pool_size=pool))
    rows.append(stats("fork_from_live_sandbox_warm_pool", fork_live, goal_ms=20.0, pool_size=pool))
    rows.append(stats("close", closes))
    wait_for_pool(env, pool)  # no sandbox starts in the background while tool calls are timed
    rows += bench_tool_calls(env, base, n)
    env.close(base)
    return rows


def bench_tool_calls(env: Environment, sid: str, n: int, shell: str = "/bin/sh") -> list[dict]:
    """run_terminal_cmd('true') paired with a host fork/exec of the same shell command (interleaved), and read_file.

    Workspace sandboxes run commands with /bin/sh, image sandboxes with /bin/bash (Harbor's `bash -c`): the host
    side runs the same shell, so the difference is the sandbox's own cost.
    """
    host, calls, reads = [], [], []
    for _ in range(n):
        host.append(timed(subprocess.run, [shell, "-c", "true"])[0])
        calls.append(timed(env.call, sid, "run_terminal_cmd", {"command": "true"})[0])
        reads.append(timed(env.call, sid, "read_file", {"path": "step0.txt"})[0])
    overhead = [c - h for c, h in zip(calls, host)]
    return [stats(f"host_{os.path.basename(shell)}_true", host), stats("run_terminal_cmd_true", calls),
            stats("tool_call_overhead", overhead, goal_ms=5.0), stats("read_file_small", reads, goal_ms=5.0)]


def bench_cold_fork(repo: str, n: int) -> dict:
    """fork with no pool: namespace setup, bwrap and the guest start inside the call."""
    with Environment(pool_size=0) as env:
        snap = env.import_repo(repo)
        samples = []
        for _ in range(n):
            dt, kid = timed(env.fork, snap)
            samples.append(dt)
            env.close(kid)
    return stats("fork_cold_no_pool", samples, goal_ms=20.0)


def bench_repo_size(small: str, big: str, n: int, pool: int) -> list[dict]:
    """fork latency and layer-store growth for a small and a big repository."""
    rows = []
    with Environment(pool_size=pool) as env:
        for name, repo in (("small", small), ("big", big)):
            snap = env.import_repo(repo)
            layers_before = len(os.listdir(env.rt.layers.root))
            samples = []
            while len(samples) < n:
                wait_for_pool(env, pool)
                kids = [timed(env.fork, snap) for _ in range(min(pool, n - len(samples)))]
                samples += [dt for dt, _ in kids]
                for _, kid in kids:
                    env.close(kid)
            size = subprocess.run(["du", "-sm", repo], capture_output=True, text=True, check=True).stdout.split()[0]
            rows.append(stats(f"fork_{name}_repo", samples, goal_ms=20.0, repo_mb=int(size),
                              new_layers_per_fork=(len(os.listdir(env.rt.layers.root)) - layers_before) / n))
    return rows


def bench_capacity(repo: str, limit: int) -> dict:
    """How many sandboxes run at once, each answering a command, stopping at the first failure."""
    live, error = [], None
    with Environment(pool_size=0, limits=SandboxLimits(sandbox_memory_bytes=1 << 30)) as env:
        snap = env.import_repo(repo)
        t = time.perf_counter()
        try:
            while len(live) < limit:
                sid = env.fork(snap)
                live.append(sid)
                obs = env.call(sid, "run_terminal_cmd", {"command": f"echo {len(live)}"})
                if not obs.ok or obs.fields["stdout"] != f"{len(live)}\n":
                    raise RuntimeError(f"sandbox {len(live)} answered {obs.content!r}")
            ok = all(env.call(s, "run_terminal_cmd", {"command": "true"}).ok for s in live)
        except Exception as e:  # noqa: BLE001 - the benchmark reports where capacity ends
            error, ok = f"{type(e).__name__}: {e}", False
        elapsed = time.perf_counter() - t
        rss = _rss_mb([env.info(s)["pid"] for s in live])
    return {"bench": "sandbox", "metric": "concurrent_sandboxes", "value": len(live), "tried": limit,
            "all_answer_at_the_end": ok, "first_failure": error, "guests_rss_mb": rss,
            "seconds_to_start": round(elapsed, 2),
            "goal": 64, "meets_goal": len(live) >= 64 and ok}


def bench_images(n: int, pool: int) -> list[dict]:
    """The image-sandbox rows (see the module docstring)."""
    from composer2_jax.env.images import ImageBuilder

    builder = ImageBuilder()
    image = builder.build(IMAGE_CONTEXT)  # builds on the first run; a cache hit afterwards
    builds = [timed(builder.build, IMAGE_CONTEXT)[0] for _ in range(n)]
    builder.close()
    rows = [stats("image_cached_build", builds, goal_ms=1000.0, layers=len(image.layers))]
    first = []
    with Environment(config=SandboxConfig(pool_size=0, image_pool_size=0)) as env:
        env.close(env.fork(env.import_image(image)))  # warm-up: the mount helper starts with the first mount
        for _ in range(max(4, n // 2)):
            t = time.perf_counter()
            sid = env.fork(env.import_image(image))  # a new snapshot of the image, a sandbox started in the call
            first.append(time.perf_counter() - t)
            assert env.call(sid, "run_terminal_cmd", {"command": "true"}).ok
            env.close(sid)
    rows.append(stats("image_first_start_cached_image_no_pool", first, goal_ms=100.0))
    warm = []
    for _ in range(max(4, n // 4)):
        with Environment(config=SandboxConfig(pool_size=0, image_pool_size=pool)) as env:
            env.close(env.create(None))  # the mount helper starts (once per process), without touching the image
            t0 = time.perf_counter()
            snap = env.import_image(image)  # the image's first import: its pool of started sandboxes fills now
            t_import = time.perf_counter() - t0
            _wait_image_pool(env, pool)
            t = time.perf_counter()
            sid = env.fork(snap)  # the image's first sandbox: a pooled sandbox mounts the image's layers
            warm.append(t_import + time.perf_counter() - t)
            env.close(sid)
    rows.append(stats("image_first_start_cached_image_warm_pool", warm, goal_ms=100.0, pool_size=pool))
    with Environment(config=SandboxConfig(pool_size=0, image_pool_size=pool)) as env:
        snap = env.import_image(image)
        forks, live, snaps = [], [], []
        while len(forks) < n:
            _wait_image_pool(env, pool)
            kids = [timed(env.fork, snap) for _ in range(min(pool, n - len(forks)))]
            forks += [dt for dt, _ in kids]
            for _, kid in kids:
                env.close(kid)
        base = env.fork(snap)
        for i in range(max(4, n // 4)):
            _wait_image_pool(env, pool)
            env.call(base, "write_file", {"path": f"/etc/live{i}", "content": "x"})
            dt, kid = timed(env.fork, base)
            live.append(dt)
            env.close(kid)
        for i in range(n):
            env.call(base, "write_file", {"path": f"step{i}.txt", "content": str(i)})
            snaps.append(timed(env.snapshot, base)[0])
        _wait_image_pool(env, pool)
        rows.append(stats("image_fork_from_snapshot_warm_pool", forks, goal_ms=20.0, pool_size=pool))
        rows.append(stats("image_fork_from_live_sandbox_warm_pool", live, goal_ms=20.0, pool_size=pool))
        rows.append(stats("image_snapshot_small_delta", snaps))
        rows += [dict(r, metric="image_" + r["metric"]) for r in bench_tool_calls(env, base, n, "/bin/bash")]
    return rows


def bench_turn_checkpoints(repo: str, episodes: int, turns: int) -> list[dict]:
    """Per-turn checkpoint cost inside harness episodes, and the episode wall time with and without checkpoints."""
    from composer2_jax.bench.policies import ScriptedPolicy, call
    from composer2_jax.data.tokenizer import ByteTokenizer
    from composer2_jax.env.harness import EpisodeOptions, HarnessConfig, run_episode

    tok, cfg = ByteTokenizer(), HarnessConfig(max_turns=turns + 1)
    replies = [call("write_file", path=f"step{i}.py", content=f"x = {i}\n" * 20)
               + call("run_terminal_cmd", command=f"python3 step{i}.py && ls | wc -l") for i in range(turns)]
    per_turn, walls = [], {True: [], False: []}
    with Environment(pool_size=2) as env:
        snap = env.import_repo(repo)
        for i in range(2 * episodes):
            checkpoints = i % 2 == 0  # interleaved, so load drifts hit both alike
            sid = env.fork(snap)
            r = run_episode(env, sid, "Do the steps.", ScriptedPolicy(tok, replies, cfg), tok, cfg,
                            EpisodeOptions(checkpoints=checkpoints))
            walls[checkpoints].append(r.wall_s)
            per_turn += [c.snapshot_s for c in r.checkpoints]
            for c in r.checkpoints:
                env.delete_snapshot(c.snapshot)
            env.close(sid)
    on, off = statistics.median(walls[True]), statistics.median(walls[False])
    return [stats("turn_checkpoint", per_turn, turns_per_episode=turns),
            {"bench": "sandbox", "metric": "episode_with_checkpoints", "episodes": episodes, "turns": turns,
             "wall_p50_ms_with": round(on * 1000, 1), "wall_p50_ms_without": round(off * 1000, 1),
             "overhead_per_turn_ms": round((on - off) * 1000 / turns, 3)}]


def _wait_image_pool(env: Environment, size: int, timeout_s: float = 30.0) -> None:
    """Block until the image pool is full again."""
    deadline = time.monotonic() + timeout_s
    while env.image_pool.ready() < size and time.monotonic() < deadline:
        time.sleep(0.01)


def _rss_mb(pids: list[int]) -> float:
    """Total resident memory of the given processes in MiB."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
        except (OSError, StopIteration):
            pass
    return round(total / 1024, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40, help="samples per latency")
    ap.add_argument("--pool", type=int, default=8, help="warm pool size")
    ap.add_argument("--max-sandboxes", type=int, default=128, help="capacity probe stops here")
    ap.add_argument("--big-files", type=int, default=2000, help="files in the big repository (50 KB each)")
    ap.add_argument("--no-images", action="store_true", help="skip the image-sandbox rows (they need podman)")
    ap.add_argument("--only-images", action="store_true", help="only the image-sandbox rows")
    ap.add_argument("--turns", type=int, default=20, help="turns per episode in the checkpoint rows")
    ap.add_argument("--only-checkpoints", action="store_true", help="only the per-turn checkpoint rows")
    args = ap.parse_args()
    if args.only_checkpoints:
        with tempfile.TemporaryDirectory() as tmp:
            for row in bench_turn_checkpoints(make_repo(tmp, 20, 2000), max(2, args.n // 10), args.turns):
                print(json.dumps(row), flush=True)
        return
    if args.only_images:
        for row in bench_images(args.n, args.pool):
            print(json.dumps(row), flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        small = make_repo(os.path.join(tmp, "small"), 20, 2000)
        big = make_repo(os.path.join(tmp, "big"), args.big_files, 50_000)
        with Environment(pool_size=args.pool) as env:
            rows = bench_latencies(env, small, args.n, args.pool)
        rows.append(bench_cold_fork(small, max(10, args.n // 2)))
        rows += bench_repo_size(small, big, max(8, args.n // 2), args.pool)
        rows.append(bench_capacity(small, args.max_sandboxes))
        rows += bench_turn_checkpoints(small, max(2, args.n // 10), args.turns)
    if not args.no_images:
        rows += bench_images(args.n, args.pool)
    for row in rows:
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
