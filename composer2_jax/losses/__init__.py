"""composer2_jax.losses."""
