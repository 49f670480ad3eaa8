"""composer2_jax.bench."""
