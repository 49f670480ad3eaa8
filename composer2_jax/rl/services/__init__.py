"""composer2_jax.rl.services."""
