"""Test setup: JAX sees 8 CPU devices so sharded code runs on toy meshes like (8,), (2, 4), (1, 2, 4)."""

import gc
import os
import subprocess
import sys
import tempfile

# Compile-time flags for the CPU tests: toy shapes run in microseconds, so the suite's time is XLA compiling, not
# running. LLVM at -O0 without its expensive passes and the classic fusion emitters (instead of the MLIR fusion
# emitters) compile a sharded train step ~40 % faster (tests/test_moe_overlap.py's pipelined step, cold cache: 75 s
# -> 46 s). They change code generation, not HLO: sharding, buffer assignment and memory_analysis are the same.
# An XLA that does not know a flag aborts the process, so they are probed once in a child and kept only if it starts;
# the verdict is passed on in the environment to xdist workers and to every process a test starts.
FAST_COMPILE_FLAGS = (
    "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true --xla_cpu_use_fusion_emitters=false"
)

if "COMPOSER2_TEST_FAST_COMPILE_FLAGS" not in os.environ:
    _probe = subprocess.run(
        [sys.executable, "-c", "import jax; jax.numpy.zeros(1).block_until_ready()"],
        env={**os.environ, "XLA_FLAGS": FAST_COMPILE_FLAGS, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        timeout=120,
    )
    os.environ["COMPOSER2_TEST_FAST_COMPILE_FLAGS"] = FAST_COMPILE_FLAGS if _probe.returncode == 0 else ""

# Must happen before jax is imported anywhere in the test session.
_flags = (os.environ.get("XLA_FLAGS", ""), os.environ["COMPOSER2_TEST_FAST_COMPILE_FLAGS"],
          "--xla_force_host_platform_device_count=8")
os.environ["XLA_FLAGS"] = " ".join(f for f in _flags if f)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent XLA cache for the session and the processes it starts (notebooks, training subprocesses, Ray
# actors, the second JAX process): many tests build the same programs from fresh closures, and a cache hit
# replaces a multi-second CPU compile with a file read. Executables are keyed by their HLO, so results are identical.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), f"composer2_jax-test-xla-cache-{os.getuid()}"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import jax  # noqa: E402 (after the environment above, which jax reads once)
import pytest  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")




@pytest.fixture(scope="module", autouse=True)
def _drop_compiled_programs_after_each_file():
    """A worker runs many whole files (xdist --dist loadfile): drop a file's in-memory compiled programs when it ends,
    so a worker holds one file's programs at a time, not every file's (the persistent cache keeps them on disk)."""
    yield
    jax.clear_caches()
    gc.collect()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI (CI=true) a skipped test fails: a missing prerequisite (bubblewrap, podman, ruff, the standard
    library's tests) must break the run, not turn a green run into one that proved nothing."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI", "").lower() == "true" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where a missing prerequisite is a failure: {reason}"


@pytest.fixture
def clean_kernel_paths(monkeypatch):
    """The kernel-path record empty and strict mode unset, before and after a test (model/kernel_paths.py)."""
    from composer2_jax.model import kernel_paths

    monkeypatch.delenv(kernel_paths.ENV_STRICT, raising=False)
    kernel_paths.set_strict(None)
    kernel_paths.reset()
    yield
    kernel_paths.set_strict(None)
    kernel_paths.reset()


@pytest.fixture(scope="module")
def upstream():
    """A loopback HTTP server the sandboxes' egress tests reach (env/testing.Upstream), one per test module."""
    from composer2_jax.env import testing as envtest

    u = envtest.Upstream()
    yield u
    u.close()
