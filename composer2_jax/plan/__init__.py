"""Scale planning without the hardware (`python -m composer2_jax.plan`; method and examples: cli.py).

    stage.py        the stages' sequence length, kernel and batch; the model config the planner compiles;
                    `Execution` (remat policy, expert capacity factor, causal block skipping). No jax.
    calibration.py  published step times (`REFERENCES`) and the calibration factors measured on them. No jax.
    hlo.py          reading compiled HLO text: collectives and their bytes; MoE chunk overlap in the schedule
    step.py         the real train step compiled on a simulated mesh, and what compiled programs cost
    roofline.py     step time and MFU from per-device costs: unpipelined, pipelined, MoE all-to-all overlap
    report.py       one mesh's plan (`plan`: memory, roofline) and the check against references (`validate`)
    search.py       the fastest fitting mesh (`search`), the fastest execution on one mesh (`search_execution`)
    rollout.py      the rollout side of an RL plan and the pod split between trainer and engines
    dry_run.py      `--dry_run` of an experiment: its config compiled as given, peak vs HBM, the planner's estimate
    cli.py          the command line (`main`); __main__.py runs it

This file imports nothing: `python -m composer2_jax.plan` must set the simulated device count before jax loads.
"""
