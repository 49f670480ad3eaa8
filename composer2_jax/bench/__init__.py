"""The benchmark: Harbor-layout tasks, the suite runner, pass@k reports (verification: verify/; authoring: authoring/).

    task.py           the task format and loader (Harbor folders; Docker-only tasks load as `Unsupported`)
    task_config.py    task.toml: Harbor's schema and defaults
    shared_files.py   the files many tasks share (verdict runner, pinned-release script), installed when a task loads
    export.py         `python -m composer2_jax.bench export`: self-contained task folders for Harbor
    policies.py       oracle / null / broken / tamper scripted policies and `model:CKPT` (the `--agent` specs)
    engine_policy.py  the inference engine as a batched Policy; loading it from a training checkpoint
    runner.py         trials in parallel sandboxes forked from one snapshot per task
    grade.py          a trial's verifier run in a fresh fork after the agent's turn; reward.json, pass
    validate.py       a suite's validation: oracle 1, null 0, every negative 0
    metrics.py        unbiased pass@k (Chen et al. 2021) and per task / category / difficulty aggregates
    report.py         the JSON record keyed by suite version, the Markdown report, the plot
    authoring/        generators, negatives, forging policies, the pinned-release script

Grading a trial is `grade.py` here (install the task's tests in a fresh fork of the agent's sandbox, run them,
read the verifier's files); the verdict machinery it and RL share (verdict runner, verdicts judged on the host,
guard, verifier network) lives in composer2_jax/verify/. Run a suite
with `python -m experiments.evaluate --suite v0 --agent oracle`; see docs/benchmark.md.
"""
