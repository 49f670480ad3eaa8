"""The GPU path imports on the device image: no grain, seqio, tensorboardX, tiktoken or ml_collections there.

A subprocess installs a meta-path finder that refuses those packages, imports the model, kernels, sharding and
every benchmark module with a `--gpu` mode, and runs a toy forward; a module that imports one of them at module
level fails the import.
"""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ABSENT_ON_DEVICE = ("grain", "seqio", "tensorboardX", "tiktoken", "ml_collections")
GPU_MODULES = ("composer2_jax.model", "composer2_jax.model.kernels", "composer2_jax.model.kernel_paths",
               "composer2_jax.model.ring_attention", "composer2_jax.model.moe", "composer2_jax.model.grouped_matmul",
               "composer2_jax.sharding", "composer2_jax.plan.cli", "composer2_jax.plan.step",
               "composer2_jax.plan.rollout", "composer2_jax.train.step", "composer2_jax.train.checkpoint",
               "composer2_jax.infer", "benchmarks.perf.ring_kernels",
               "benchmarks.perf.moe_dispatch", "benchmarks.perf.decode", "benchmarks.perf.train_stack",
               "benchmarks.perf.gpu_probe",
               "benchmarks.perf.gpu_fit", "benchmarks.perf.gpu_suite")

SCRIPT = textwrap.dedent("""
    import importlib, importlib.abc, sys

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {absent!r}:
                raise ModuleNotFoundError(f"{{name}} is not installed on the device image", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
    for m in {modules!r}:
        importlib.import_module(m)
    import jax, jax.numpy as jnp
    from composer2_jax.model_config import get_model_config
    from composer2_jax.model import Transformer
    cfg = get_model_config("toy")
    tok = jnp.zeros((1, 16), jnp.int32)
    variables = Transformer(cfg).init(jax.random.key(0), tok)
    logits = Transformer(cfg).apply(variables, tok).logits
    assert logits.shape == (1, 16, cfg.vocab_size), logits.shape
    assert not any(m.split(".")[0] in {absent!r} for m in sys.modules), sorted(sys.modules)
    print("IMPORTED", len({modules!r}))
""")


def _run(modules) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    code = SCRIPT.format(absent=set(ABSENT_ON_DEVICE), modules=tuple(modules))
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_gpu_path_imports_without_data_and_config_packages():
    r = _run(GPU_MODULES)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"IMPORTED {len(GPU_MODULES)}" in r.stdout


def test_the_refusing_finder_does_refuse():
    """The check can fail: the data pipeline needs grain, so importing it under the finder must break."""
    r = _run(("composer2_jax.data.pipeline",))
    assert r.returncode != 0
    assert "not installed on the device image" in r.stderr


def _benchmark_modules() -> list[str]:
    """Every module under benchmarks/ except the task directories (benchmarks/tasks/v*/ hold task repositories,
    not importable code)."""
    names = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, "benchmarks")):
        rel = os.path.relpath(dirpath, ROOT)
        dirnames[:] = [d for d in dirnames if not (rel == os.path.join("benchmarks", "tasks") and d.startswith("v"))
                       and d != "__pycache__"]
        for f in filenames:
            if f.endswith(".py"):
                mod = os.path.join(rel, f[:-3]).replace(os.sep, ".")
                names.append(mod[:-len(".__init__")] if mod.endswith(".__init__") else mod)
    return sorted(names)


def test_every_benchmark_module_imports():
    """A benchmark whose import broke in a move (e.g. benchmarks.common → benchmarks.perf.common) fails here in the
    fast step, not first in the slow test or GPU script that runs it."""
    modules = _benchmark_modules()
    assert "benchmarks.learning.fp8_vs_bf16" in modules and "benchmarks.perf.common" in modules, modules
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    importlib.import_module(m)\n"
            "print('IMPORTED', len(sys.argv))\n")
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "IMPORTED" in r.stdout
