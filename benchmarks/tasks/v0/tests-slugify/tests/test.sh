#!/usr/bin/env bash
# Hidden verifier (Harbor layout): mutation-grades the agent's tests; the reward goes to
# $LOGS_DIR/verifier/reward.txt (Harbor: /logs/verifier/reward.txt).
TESTS_DIR="${TESTS_DIR:-/tests}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
python3 "$TESTS_DIR/mutation_grade.py"
if [ $? -eq 0 ]; then echo 1 > "$LOGS_DIR/verifier/reward.txt"; else echo 0 > "$LOGS_DIR/verifier/reward.txt"; fi
