"""composer2_jax.rl."""
