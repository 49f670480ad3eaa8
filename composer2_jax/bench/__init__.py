"""The benchmark: Harbor-layout tasks, the suite runner, pass@k reports, task generation (verification: verify/).

    task.py           the task format and loader (Harbor folders; Docker-only tasks load as `Unsupported`)
    forging.py        a zoo of forging policies (benchmarks/tasks/forgery_grid.py grades them on every task kind)
    policies.py       oracle / null / broken / tamper scripted policies and `model:CKPT` (the `--agent` specs)
    engine_policy.py  the inference engine as a batched Policy; loading it from a training checkpoint
    runner.py         trials in parallel sandboxes forked from one snapshot per task
    metrics.py        unbiased pass@k (Chen et al. 2021) and per task / category / difficulty aggregates
    report.py         the JSON record keyed by suite version, the Markdown report, the plot
    generate.py       feature-deletion tasks from standard-library modules and their Lib/test tests

Grading and verdicts (grade, verdict runner, guard, verifier network) live in composer2_jax/verify/. Run a suite
with `python -m experiments.evaluate --suite v0 --agent oracle`; see docs/benchmark.md.
"""
