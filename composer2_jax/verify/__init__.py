"""Verification: what decides a task's reward, shared by the benchmark (bench/) and RL (rl/).

    verdict_runner.py the verdict protocol: code under test answers values in an isolated child (installed into a
                      task's tests/ when it is graded)
    verdict.py        its host side: judging a task's answers against hidden values the sandbox never holds
    grade.py          hidden tests copied into a fresh fork of the final workspace; reward read from outside
    record.py         authoring checks: recording hidden values from the oracle, checking the runner's copies
    guard.py          sitecustomize for third-party verifiers: the workspace cannot shadow stdlib or test runners
    network.py        the verifier phase's network: package registries and the mirror map
"""
