"""Workspace sandboxes (`create(repo)`) on the VM backend beside bubblewrap's, measured in one run; JSON lines.

    python -m benchmarks.perf.vm_workspace_latency [--n 5]

Per backend: the first `create(repo)` (VM: builds or loads the workspace image, boots it, confines the guest and
takes the warm memory snapshot, then forks from it; bwrap: imports the repo as a layer and starts a sandbox), then
--n further creates (VM: a fork of the warm snapshot plus the repo copied in over put_dir), and a tool call
(run_terminal_cmd 'true') in a created sandbox. The repo is tests/data/harbor (a few small files).
"""

import argparse
import json
import os

from benchmarks.perf.vm_latency import row, timed
from composer2_jax.env import Environment, SandboxConfig

REPO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "data",
                    "harbor")


def bench(backend: str, n: int) -> list[dict]:
    """First create, later creates and a tool call for one backend."""
    env = Environment(config=SandboxConfig(backend=backend))
    try:
        first, sid = timed(env.create, REPO)
        env.close(sid)
        creates, calls = [], []
        for _ in range(n):
            dt, sid = timed(env.create, REPO)
            creates.append(dt)
            calls += [timed(env.call, sid, "run_terminal_cmd", {"command": "true"})[0] for _ in range(3)]
            env.close(sid)
        extra = {"vmm": f"{env.vmm.kind}-{env.vmm.accel}"} if backend == "vm" else {}
        return [{**row(backend, "first_create", [first], **extra), "bench": "vm_workspace"},
                {**row(backend, "create", creates, **extra), "bench": "vm_workspace"},
                {**row(backend, "tool_call_true", calls, **extra), "bench": "vm_workspace"}]
    finally:
        env.shutdown()


def main() -> None:
    """Run both backends and print JSON lines."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5, help="creates after the first, per backend")
    args = ap.parse_args()
    for backend in ("bwrap", "vm"):
        for r in bench(backend, args.n):
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
