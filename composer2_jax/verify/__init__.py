"""Verification: the verdict machinery under the benchmark (bench/) and RL (rl/); it imports neither, nor the
task format (grading a task's trial is bench/grade.py; recording expected values, bench/authoring/record.py).

    verdict_runner.py the verdict protocol: code under test answers values in an isolated child (installed into a
                      task's tests/ when it is graded)
    verdict.py        its host side: judging a task's answers against hidden values the sandbox never holds
    guard.py          sitecustomize for third-party verifiers: the workspace cannot shadow stdlib or test runners
    network.py        the verifier phase's network: package registries and the mirror map
"""
