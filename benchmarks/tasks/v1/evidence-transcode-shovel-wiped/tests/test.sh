#!/usr/bin/env bash
# Hidden verifier (Harbor layout), run from the repository root. The verdict runner runs the probes of probes.py
# against the repository in an isolated child interpreter that can only answer with values, and judges them
# against expected.json; the reward goes to $LOGS_DIR/verifier/reward.txt (Harbor: /logs/verifier/reward.txt).
# The project's graders keep expected.json on the host and judge the runner's answers.json there instead.
python3 -I -S "${TESTS_DIR:-/tests}/verdict_runner.py"
