"""VM sandboxes (env/vm) beside bubblewrap image sandboxes, measured in one run; JSON lines.

    python -m benchmarks.perf.vm_latency [--n 3] [--concurrent 4] [--machine-gib 24]

Both backends run tests/data/harbor/apt-pytest's image (built once and cached) with the same workload: a web server
started in the sandbox before the snapshot. Per backend: cold start (a fresh sandbox of the image: the VM boots its
kernel; bwrap starts namespaces and the guest), snapshot (VM: memory + devices + a frozen disk layer; bwrap: files
only, its processes are stopped), fork from that snapshot, restore in place, a tool call (run_terminal_cmd 'true'),
and resident memory per sandbox (VM: the QEMU process's RSS, the guest's touched RAM included; bwrap: the RSS of
every process in the sandbox's pid namespace). `processes_survive` says whether the server answered in the fork.
Concurrent VMs: --concurrent forks run at once, their summed RSS and the drop of MemAvailable are measured, and the
count a --machine-gib machine holds is extrapolated from the per-VM RSS (labelled "extrapolated"); the idle VMs' CPU
use over 10 s is given per VM.
"""

import argparse
import json
import os
import statistics
import time

from composer2_jax.env import Environment, SandboxConfig
from composer2_jax.env import testing as envtest
from composer2_jax.env.images import ImageBuilder

IMAGE_CONTEXT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "harbor",
                             "apt-pytest", "environment")
SERVE = "cd /tmp && (nohup python3 -m http.server 8780 >/dev/null 2>&1 &) && sleep 3"
PROBE = "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8780/', timeout=10).status)\""


def row(backend: str, metric: str, samples_s: list[float], **extra) -> dict:
    """One JSON row: p50 / mean / min / max in ms."""
    ms = [s * 1000 for s in samples_s]
    return {"bench": "vm_sandbox", "backend": backend, "metric": metric, "n": len(ms),
            "p50_ms": round(statistics.median(ms), 1), "mean_ms": round(statistics.fmean(ms), 1),
            "min_ms": round(min(ms), 1), "max_ms": round(max(ms), 1), **extra}


def timed(fn, *args):
    """(seconds, result) of one call."""
    t = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t, result


def rss_bytes(pids: list[int]) -> int:
    """Summed VmRSS of processes."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) * 1024
        except (OSError, StopIteration):
            continue
    return total


def sandbox_rss(env: Environment, sid: str) -> int:
    """Resident bytes of one sandbox (see the module docstring)."""
    info = env.info(sid)
    return rss_bytes([info["pid"]] if info.get("vmm") else envtest.pids_in_pidns(info["pidns"]))


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes used so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def mem_available() -> int:
    """MemAvailable of the host in bytes."""
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:")) * 1024


def probe(env: Environment, sid: str) -> bool:
    """Whether the server started before the snapshot answers."""
    obs = env.call(sid, "run_terminal_cmd", {"command": PROBE})
    return obs.fields.get("stdout") == "200\n"


def bench_backend(backend: str, image, n: int) -> tuple[list[dict], Environment, str]:
    """Cold start, snapshot, fork, restore, tool call and RSS for one backend; (rows, env, warm snapshot id)."""
    env = Environment(config=SandboxConfig(backend=backend, image_pool_size=0))
    image_snap = env.import_image(image)
    colds, snaps, forks, restores, calls, rss, survive = [], [], [], [], [], [], []
    for _ in range(n):
        dt, sid = timed(env.fork, image_snap)
        colds.append(dt)
        env.call(sid, "run_terminal_cmd", {"command": SERVE})
        dt, snap = timed(env.snapshot, sid)
        snaps.append(dt)
        dt, kid = timed(env.fork, snap)
        forks.append(dt)
        survive.append(probe(env, kid))
        for _ in range(3):
            calls.append(timed(env.call, kid, "run_terminal_cmd", {"command": "true"})[0])
        rss.append(sandbox_rss(env, kid))
        env.call(kid, "run_terminal_cmd", {"command": "rm -rf /tmp/*"})
        restores.append(timed(env.restore, kid, snap)[0])
        for s in (sid, kid):
            env.close(s)
    extra = {"vmm": f"{env.vmm.kind}-{env.vmm.accel}"} if backend == "vm" else {}
    rows = [row(backend, "cold_start", colds, **extra), row(backend, "snapshot", snaps, **extra),
            row(backend, "fork", forks, processes_survive=all(survive), **extra),
            row(backend, "restore", restores, **extra), row(backend, "tool_call_true", calls, **extra),
            {"bench": "vm_sandbox", "backend": backend, "metric": "rss_per_sandbox_mib", "n": len(rss),
             "mean": round(statistics.fmean(rss) / 2**20, 1), "max": round(max(rss) / 2**20, 1), **extra}]
    return rows, env, snap


def bench_concurrent(env: Environment, snap: str, count: int, machine_gib: float) -> list[dict]:
    """count VMs resumed from one snapshot at once: their RSS, MemAvailable's drop, and the extrapolated capacity."""
    before = mem_available()
    t = time.perf_counter()
    sids = [env.fork(snap) for _ in range(count)]
    wall = time.perf_counter() - t
    alive = sum(probe(env, sid) for sid in sids)
    per_vm = [sandbox_rss(env, sid) for sid in sids]
    dropped = before - mem_available()
    pids = [env.info(sid)["pid"] for sid in sids]
    cpu0, t0 = cpu_seconds(pids), time.perf_counter()
    time.sleep(10)
    idle = (cpu_seconds(pids) - cpu0) / (time.perf_counter() - t0) / count
    for sid in sids:
        env.close(sid)
    mean = statistics.fmean(per_vm)
    return [{"bench": "vm_sandbox", "backend": "vm", "metric": "concurrent", "vms": count, "answering": alive,
             "fork_all_s": round(wall, 1), "rss_sum_mib": round(sum(per_vm) / 2**20, 1),
             "rss_mean_mib": round(mean / 2**20, 1), "mem_available_drop_mib": round(dropped / 2**20, 1),
             "idle_cpu_cores_per_vm": round(idle, 4)},
            {"bench": "vm_sandbox", "backend": "vm", "metric": "vms_per_machine", "label": "extrapolated",
             "machine_gib": machine_gib, "from": "machine RAM / mean RSS per VM (ignores the host's own use)",
             "vms": int(machine_gib * 2**30 // mean)}]


def main() -> None:
    """Run both backends and print JSON lines."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3, help="samples per latency (each a fresh sandbox)")
    ap.add_argument("--concurrent", type=int, default=4, help="VMs run at once for the memory measurement")
    ap.add_argument("--machine-gib", type=float, default=24.0, help="RAM of the machine the capacity is given for")
    args = ap.parse_args()
    image = ImageBuilder().build(IMAGE_CONTEXT)
    for backend in ("bwrap", "vm"):
        rows, env, snap = bench_backend(backend, image, args.n)
        if backend == "vm":
            rows += bench_concurrent(env, snap, args.concurrent, args.machine_gib)
            state = env._snapshots[snap].state
            rows.append({"bench": "vm_sandbox", "backend": "vm", "metric": "memory_state_file_mib",
                         "size": round(os.path.getsize(state) / 2**20, 1), "guest_ram_mib": env.spec.memory_mib})
        for r in rows:
            print(json.dumps(r), flush=True)
        env.shutdown()


if __name__ == "__main__":
    main()
