#!/usr/bin/env bash
# Hidden verifier (Harbor layout). Runs from the repository root; the tests live in $TESTS_DIR (Harbor: /tests)
# and the reward goes to $LOGS_DIR/verifier/reward.txt (Harbor: /logs/verifier/reward.txt).
TESTS_DIR="${TESTS_DIR:-/tests}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
python3 -m unittest discover -s "$TESTS_DIR" -t "$TESTS_DIR" -p 'test_*.py' -v
if [ $? -eq 0 ]; then echo 1 > "$LOGS_DIR/verifier/reward.txt"; else echo 0 > "$LOGS_DIR/verifier/reward.txt"; fi
