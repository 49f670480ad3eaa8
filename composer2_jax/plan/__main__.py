"""`python -m composer2_jax.plan ...`: the planner's command line (composer2_jax/plan/cli.py)."""

from composer2_jax.plan.cli import main

if __name__ == "__main__":
    main()
