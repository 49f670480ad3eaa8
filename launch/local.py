"""Run an experiment as N JAX processes on this machine (CPU), e.g. to test multi-host code paths.

    python -m launch.local --processes 2 --devices_per_process 4 -- experiments.cpt_bulk --config.steps=10

Each process gets C2J_COORDINATOR / C2J_NUM_PROCESSES / C2J_PROCESS_ID (read by
composer2_jax.train.distributed.initialize) and its own fake CPU devices. Exit code: the first non-zero one.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys


def free_port() -> int:
    """A free TCP port on loopback for the coordinator."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(module: str, args: list[str], processes: int, devices_per_process: int, timeout: float = 3600) -> int:
    """Start the processes, stream their output with a [rank] prefix, return the first non-zero exit code."""
    coord = f"127.0.0.1:{free_port()}"
    procs = []
    for rank in range(processes):
        env = dict(os.environ, C2J_COORDINATOR=coord, C2J_NUM_PROCESSES=str(processes), C2J_PROCESS_ID=str(rank),
                   JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1",
                   XLA_FLAGS=f"--xla_force_host_platform_device_count={devices_per_process}")
        procs.append(subprocess.Popen([sys.executable, "-m", module, *args], env=env))
    codes = []
    try:
        codes = [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return next((c for c in codes if c), 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--devices_per_process", type=int, default=4)
    ap.add_argument("module", help="python module to run, e.g. experiments.cpt_bulk")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    sys.exit(launch(a.module, [x for x in a.args if x != "--"], a.processes, a.devices_per_process))


if __name__ == "__main__":
    main()
