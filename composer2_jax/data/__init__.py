"""composer2_jax.data."""
