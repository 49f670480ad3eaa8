"""The prepared GPU run: every --gpu benchmark as its own bounded process, riskiest first, in ≤ 8 minutes.

    python -m benchmarks.perf.gpu_suite --out $OUT            # on one H200 (README: "Running on a lent GPU")
    python -m benchmarks.perf.gpu_suite --out $OUT --only moe model_step   # a rerun of some stages
    python -m benchmarks.perf.gpu_suite --smoke --out /tmp/s  # the same stages at toy sizes on CPU
                                                              # (tests/test_gpu_suite.py)

Each stage is a subprocess with its own timeout (cut to what is left of the total), strict kernels on
(COMPOSER2_STRICT_KERNELS=1: a fallback fails the stage naming its reason) and XLA_PYTHON_CLIENT_MEM_FRACTION =
gpu_fit.MEM_FRACTION, the fraction tests/test_gpu_fit.py checks every program's compiled peak against. A failed or
timed-out stage does not stop the next. Three files land in --out (the device tool returns at most 8):
  results.jsonl  every JSON line of every stage, with "stage" added
  logs.txt       per stage: command, status, seconds, and the last lines of its stderr when it failed
  summary.txt    the one-screen summary also printed at the end
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import NamedTuple

from benchmarks.perf.gpu_fit import MEM_FRACTION, TRAIN_GPU

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOTAL_S = 480  # the whole GPU suite, seconds
SMOKE_TOTAL_S = 1500  # the CPU smoke (2 shared cores)


class Stage(NamedTuple):
    """One bounded process: name, argv after `python -m`, timeout on the GPU (s), extra argv in --smoke."""

    name: str
    argv: tuple[str, ...]
    timeout_s: int
    smoke_argv: tuple[str, ...] = ("--smoke",)


RING = ("benchmarks.perf.ring_kernels", "--gpu")
STAGES = (  # riskiest first: what would void every later figure fails first, in seconds
    Stage("probe", ("benchmarks.perf.gpu_probe",), 30),
    Stage("block_check", RING + ("--stage", "check"), 35),
    Stage("block_tflops_8k", RING + ("--stage", "tflops", "--t", "8192"), 35),
    Stage("block_tflops_32k", RING + ("--stage", "tflops", "--t", "32768"), 45),
    Stage("ring_device_program", RING + ("--stage", "device_program"), 45),
    Stage("moe", ("benchmarks.perf.moe_dispatch", "--gpu", "--repeats", "3"), 75),
    Stage("model_step", RING + ("--stage", "model_step"), 80),
    Stage("decode", ("benchmarks.perf.decode", "--gpu", "--new_tokens", "64"), 60),
    Stage("train", ("benchmarks.perf.train_stack", "--preset", TRAIN_GPU["preset"],
                    "--seq_len", str(TRAIN_GPU["seq_len"]), "--batch", str(TRAIN_GPU["batch"]),
                    "--optimizer", TRAIN_GPU["optimizer"], "--steps", "5",
                    "--no-pipeline", "--no-checkpoint"), 75,
          smoke_argv=("--preset", "toy", "--seq_len", "64", "--batch", "2", "--steps", "2")),
)


def stage_command(stage: Stage, smoke: bool) -> list[str]:
    """argv of a stage; in --smoke the train stage's sizes are replaced (later flags win in argparse)."""
    return [sys.executable, "-m", *stage.argv, *(stage.smoke_argv if smoke else ())]


def stage_env(smoke: bool) -> dict:
    """Environment of every stage: strict kernels, the preallocation fraction, unbuffered output; CPU in smoke."""
    env = dict(os.environ, COMPOSER2_STRICT_KERNELS="1", XLA_PYTHON_CLIENT_MEM_FRACTION=str(MEM_FRACTION),
               PYTHONUNBUFFERED="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if smoke:
        env["JAX_PLATFORMS"] = "cpu"
    return env


def run_stage(stage: Stage, smoke: bool, timeout_s: float) -> dict:
    """Run one stage; its JSON lines and a status record {stage, status, seconds, rc, lines, stderr_tail}."""
    cmd = stage_command(stage, smoke)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=stage_env(smoke), capture_output=True, text=True, timeout=timeout_s)
        out, err, rc = p.stdout, p.stderr, p.returncode
        status = "ok" if rc == 0 else "failed"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc, status = None, "timeout"
    lines = []
    for line in out.splitlines():
        if line.startswith("{"):
            try:
                lines.append(dict(json.loads(line), stage=stage.name))
            except json.JSONDecodeError:
                pass
    fallbacks = sorted({f"{site}: {r}" for rec in lines
                        for site, rs in rec.get("kernel_paths", {}).get("fallbacks", {}).items() for r in rs})
    tail = [x for x in err.splitlines() if "Warning" not in x][-25:] if status != "ok" else []
    return dict(stage=stage.name, status=status, rc=rc, seconds=round(time.time() - t0, 1), lines=lines,
                fallbacks=fallbacks, command=" ".join(cmd[1:]), stderr_tail=tail)


_KEYS = ("kernel", "impl", "gmm", "t", "seq", "experts", "max_abs_err", "block_fwd_bwd_tflops", "cudnn_fwd_bwd_tflops",
         "block_over_ceiling_time", "useful_tflops", "tflops", "ratio_to_dense", "step_s", "peak_gib", "mfu",
         "tokens_per_s", "plain_tokens_per_s", "spec_tokens_per_s", "num_draft", "backend", "device")


def _brief(rec: dict) -> str:
    """One summary line of a JSON record: its bench, a few figures, and the kernel paths it took."""
    parts = [rec.get("bench", "?")]
    for k in _KEYS:
        if k in rec:
            v = rec[k]
            if isinstance(v, dict):
                v = "/".join(f"{x:.2g}" if isinstance(x, float) else str(x) for x in v.values())
            elif isinstance(v, float):
                v = f"{v:.3g}"
            parts.append(f"{k}={v}")
    paths = rec.get("kernel_paths", {}).get("paths", {})
    if paths:
        parts.append("paths=" + ",".join(f"{s}:{'|'.join(p)}" for s, p in paths.items()))
    return " ".join(parts)


def summary(results: list[dict], total_s: float) -> str:
    """The one-screen summary: a status line per stage, then its records in brief."""
    ok = sum(r["status"] == "ok" for r in results)
    out = [f"GPU suite: {ok}/{len(results)} stages ok in {total_s:.0f} s"]
    for r in results:
        out.append(f"[{r['status']:>7}] {r['stage']} ({r['seconds']} s, {len(r['lines'])} lines)"
                   + (f" FALLBACKS: {r['fallbacks']}" if r["fallbacks"] else ""))
        for rec in r["lines"]:
            if rec.get("bench") not in ("env",):
                out.append("    " + _brief(rec)[:150])
        if r["stderr_tail"]:
            out.append("    ! " + r["stderr_tail"][-1][:146])
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu_suite_out", help="folder for the three files")
    ap.add_argument("--smoke", action="store_true", help="toy sizes on CPU, same stages")
    ap.add_argument("--only", nargs="+", choices=[s.name for s in STAGES], help="run these stages only")
    ap.add_argument("--total_s", type=float, default=None, help=f"overall limit (default {TOTAL_S}, smoke "
                                                                 f"{SMOKE_TOTAL_S})")
    a = ap.parse_args(argv)
    total = a.total_s or (SMOKE_TOTAL_S if a.smoke else TOTAL_S)
    os.makedirs(a.out, exist_ok=True)
    t0, results = time.time(), []
    for stage in STAGES:
        if a.only and stage.name not in a.only:
            continue
        left = total - (time.time() - t0)
        if left < 5:
            results.append(dict(stage=stage.name, status="skipped", rc=None, seconds=0, lines=[], fallbacks=[],
                                command="", stderr_tail=["no time left in the suite's total"]))
            continue
        limit = min(left, stage.timeout_s * (20 if a.smoke else 1))
        print(f"[gpu_suite] {stage.name} (≤ {limit:.0f} s)", flush=True)
        results.append(run_stage(stage, a.smoke, limit))
    with open(os.path.join(a.out, "results.jsonl"), "w") as f:
        for r in results:
            for rec in r["lines"]:
                f.write(json.dumps(rec) + "\n")
    with open(os.path.join(a.out, "logs.txt"), "w") as f:
        for r in results:
            f.write(f"== {r['stage']}: {r['status']} rc={r['rc']} {r['seconds']} s\n$ python -m {r['command']}\n")
            f.write("".join(x + "\n" for x in r["stderr_tail"]))
    text = summary(results, time.time() - t0)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print(text, flush=True)
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
