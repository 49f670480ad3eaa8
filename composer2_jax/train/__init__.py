"""composer2_jax.train."""
