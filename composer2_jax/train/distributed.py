"""Multi-process start-up: one call that joins the JAX distributed runtime from whatever launched us.

- Local multi-process CPU (launch/local.py): C2J_COORDINATOR, C2J_NUM_PROCESSES, C2J_PROCESS_ID.
- GPU Slurm (launch/gpu_slurm.sbatch): jax.distributed.initialize() reads SLURM_* itself.
- TPU pods (launch/tpu_pod.sh): jax.distributed.initialize() reads the TPU metadata itself.
"""

from __future__ import annotations

import os

import jax

_done = False


def initialize() -> bool:
    """Join the distributed runtime if this process was launched as one of several; returns whether it did."""
    global _done
    if _done:
        return True
    if "C2J_COORDINATOR" in os.environ:
        # CPU collectives across processes go through gloo (harmless on GPU/TPU, where it is unused).
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(os.environ["C2J_COORDINATOR"], int(os.environ["C2J_NUM_PROCESSES"]),
                                   int(os.environ["C2J_PROCESS_ID"]))
    elif "SLURM_JOB_ID" in os.environ and int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        jax.distributed.initialize()
    elif os.environ.get("TPU_WORKER_HOSTNAMES") or os.environ.get("MEGASCALE_COORDINATOR_ADDRESS"):
        jax.distributed.initialize()
    else:
        return False
    _done = True
    return True


def barrier(name: str, timeout_s: int = 3600) -> None:
    """Every process waits here for the others (no-op in a single process). A barrier of the coordination service,
    not a device collective: CPU collectives (gloo) give up on a peer that arrives more than 30 s late, so processes
    that finish compiling a program far apart (a loaded host, one process hitting the compilation cache) meet here
    before the program's first collective. `name` must be unique within the run."""
    if jax.process_count() == 1:
        return
    from orbax.checkpoint import multihost

    multihost.sync_global_processes(name, timeout=timeout_s)


def kv_client():
    """The coordination service's key-value client of this jax.distributed job (None outside one). JAX has no public
    accessor; orbax's multihost utilities read the same attribute."""
    from jax._src import distributed as jax_distributed

    return jax_distributed.global_state.client
