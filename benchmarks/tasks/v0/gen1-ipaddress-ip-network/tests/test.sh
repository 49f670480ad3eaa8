#!/usr/bin/env bash
# Hidden verifier (generated): the module's own Lib/test classes that exercise ip_network, plus a check that the
# function is defined in the vendored module. Reward to $LOGS_DIR/verifier/reward.txt (Harbor: /logs/verifier).
TESTS_DIR="${TESTS_DIR:-/tests}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
PYTHONPATH="$TESTS_DIR" python3 -m unittest -v test_ipaddress.FactoryFunctionErrors test_ipaddress.ComparisonTests test_ipaddress.IpaddrUnitTest test_restored
if [ $? -eq 0 ]; then echo 1 > "$LOGS_DIR/verifier/reward.txt"; else echo 0 > "$LOGS_DIR/verifier/reward.txt"; fi
