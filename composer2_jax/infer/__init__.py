"""composer2_jax.infer."""
