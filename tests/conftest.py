"""Test setup: JAX sees 8 CPU devices so sharded code runs on toy meshes like (8,), (2, 4), (1, 2, 4)."""

import os

# Must happen before jax is imported anywhere in the test session.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")


