#!/bin/bash
source /tests/check.sh
if [ -f /app/setup-ran ] && [ "$(tail -n1 /app/data.txt)" = "four" ]; then check_lines "$EXPECTED_LINES"
else echo 0 > /logs/verifier/reward.txt; fi
