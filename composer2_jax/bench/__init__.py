"""The benchmark: Harbor-layout tasks, grading in fresh forks, the suite runner, pass@k reports, task generation.

    task.py           the task format and loader (Harbor folders; Docker-only tasks load as `Unsupported`)
    grade.py          hidden tests copied into a fresh fork of the final workspace; reward read from outside
    verdict_runner.py the verdict protocol: code under test answers values in an isolated child (copied into tasks)
    verdict.py        its host side: judging a task's answers against hidden values the sandbox never holds
    verdict_record.py authoring checks: syncing the runner's copies, recording hidden values from the oracle
    verifier_guard.py sitecustomize for third-party verifiers: the workspace cannot shadow stdlib or test runners
    forging.py        a zoo of forging policies (benchmarks/forging.py grades them on every task kind)
    agents.py         oracle / null / broken / tamper scripted agents and `model:CKPT`, all harness Policies
    engine_policy.py  the inference engine as a batched Policy; loading it from a training checkpoint
    runner.py         trials in parallel sandboxes forked from one snapshot per task
    metrics.py        unbiased pass@k (Chen et al. 2021) and per task / category / difficulty aggregates
    report.py         the JSON record keyed by suite version, the Markdown report, the plot
    generate.py       feature-deletion tasks from standard-library modules and their Lib/test tests

Run a suite with `python -m experiments.evaluate --suite v0 --agent oracle`; see docs/benchmark.md.
"""

from composer2_jax.bench.grade import Grade, grade
from composer2_jax.bench.metrics import aggregate, pass_at_k
from composer2_jax.bench.runner import SnapshotCache, Trial, run_suite
from composer2_jax.bench.task import Suite, Task, TaskConfig, TaskError, Unsupported, load_suite, load_task

__all__ = ["Grade", "SnapshotCache", "Suite", "Task", "TaskConfig", "TaskError", "Trial", "Unsupported", "aggregate",
           "grade", "load_suite", "load_task", "pass_at_k", "run_suite"]
