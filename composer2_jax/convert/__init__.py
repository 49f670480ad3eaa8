"""composer2_jax.convert."""
