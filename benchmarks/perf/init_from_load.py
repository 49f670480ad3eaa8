"""Loading a pretrained HF checkpoint onto a mesh: seconds and peak host memory per GB of checkpoint.

    python -m benchmarks.perf.init_from_load                     (≈ 0.3 GB bf16 checkpoint, 8 fake CPU devices)
    python -m benchmarks.perf.init_from_load --experts 128 --layers 8

Writes a random Kimi-shaped DeepseekV3 with transformers (bf16 safetensors, several shards), then loads it twice, each
time in a fresh process on 8 fake CPU devices (fsdp=8), the target parameters in float32:
  streamed   train/init_from.load_params: each device shard reads its own slice of the memory-mapped tensors
  host_copy  the whole checkpoint read into host memory first (convert.load_hf_checkpoint), then put on the mesh
and prints one JSON line per mode: seconds, the process's peak resident memory above its baseline (VmHWM: it counts
the memory-mapped checkpoint pages the load touched, page cache the OS can drop) and its peak resident anonymous
memory (sampled every 5 ms: what the loading path allocates), the bytes the loaded parameters occupy (on a CPU
"device" they live in host memory too), and each overhead beyond them per GB of checkpoint on disk. The anonymous
overhead is what a GPU/TPU host needs on top of its device memory: the loading path's own buffers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from benchmarks.perf.common import emit


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _anon_mb() -> float:
    """Resident anonymous memory (allocations; not the page cache of memory-mapped files, which the OS can drop)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class _AnonPeak:
    """The peak of `_anon_mb` sampled every 5 ms on a thread while the block runs."""

    def __enter__(self):
        import threading

        self.peak, self.stop = _anon_mb(), threading.Event()

        def watch():
            while not self.stop.wait(0.005):
                self.peak = max(self.peak, _anon_mb())

        self.thread = threading.Thread(target=watch, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, _anon_mb())
        return False


def write_checkpoint(out: str, layers: int, experts: int, width: int) -> float:
    """A random bf16 DeepseekV3 at out; its size on disk in GB."""
    import torch

    from composer2_jax.convert.testing import KIMI_LIKE, random_hf_model

    spec = dict(KIMI_LIKE, vocab_size=32000, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                n_routed_experts=experts, moe_intermediate_size=width // 2, max_position_embeddings=4096)
    random_hf_model(spec, seed=0).to(torch.bfloat16).save_pretrained(out, max_shard_size="100MB")
    return sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".safetensors")) / 1e9


def load(path: str, mode: str) -> dict:
    """Load path onto fsdp=8 in this process; timing and memory."""
    import dataclasses

    import jax

    from composer2_jax import sharding as shd
    from composer2_jax.model import Transformer
    from composer2_jax.model_config import preset
    from composer2_jax.train import init_from, optim
    from composer2_jax.train.state import abstract_train_state

    cfg = init_from.stage_model("toy", dataclasses.replace(preset("toy"), num_mtp_layers=0), path)
    mesh = shd.make_mesh(shd.MeshConfig(fsdp=-1))
    model = Transformer(cfg, mesh)
    abstract, _, _ = abstract_train_state(model, lambda p, n: optim.make_optimizer(optim.OptimConfig(), p, n),
                                          mesh, (8, 64))
    base, anon_base = _rss_mb(), _anon_mb()
    t0 = time.time()
    with _AnonPeak() as anon:
        if mode == "streamed":
            params, router = init_from.load_params(path, abstract, model)
        else:
            from composer2_jax.convert import load_hf_checkpoint

            _, host_params, host_router = load_hf_checkpoint(path, dtype="float32")
            params = jax.tree.map(lambda a, s: jax.device_put(a, s.sharding), host_params, abstract.params)
            router = jax.tree.map(lambda a, s: jax.device_put(a, s.sharding), host_router, abstract.router_state)
            del host_params, host_router
        jax.block_until_ready((params, router))
    seconds = time.time() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB → MB
    loaded = sum(x.nbytes for x in jax.tree.leaves((params, router))) / 2**20
    return dict(seconds=round(seconds, 2), baseline_mb=round(base, 1), peak_mb=round(peak, 1),
                peak_above_baseline_mb=round(peak - base, 1), params_mb=round(loaded, 1),
                overhead_mb=round(peak - base - loaded, 1), anon_peak_above_baseline_mb=round(anon.peak - anon_base, 1),
                anon_overhead_mb=round(anon.peak - anon_base - loaded, 1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--child", nargs=2, metavar=("PATH", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(load(*args.child)), flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        gb = write_checkpoint(tmp, args.layers, args.experts, args.width)
        env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") +
                                          " --xla_force_host_platform_device_count=8").strip(), JAX_PLATFORMS="cpu")
        for mode in ("streamed", "host_copy"):
            r = subprocess.run([sys.executable, "-m", "benchmarks.perf.init_from_load", "--child", tmp, mode], env=env,
                               capture_output=True, text=True, check=True)
            rec = json.loads(r.stdout.strip().splitlines()[-1])
            emit(bench="init_from_load", mode=mode, checkpoint_gb=round(gb, 3), devices=8, **rec,
                 seconds_per_gb=round(rec["seconds"] / gb, 2),
                 overhead_mb_per_gb=round(rec["overhead_mb"] / gb, 1),
                 anon_overhead_mb_per_gb=round(rec["anon_overhead_mb"] / gb, 1))


if __name__ == "__main__":
    main()
