#!/bin/bash
# shared helper: check_lines N writes the reward for "data.txt has N lines"
check_lines() {
  if [ -f /app/data.txt ] && [ "$(wc -l < /app/data.txt)" = "$1" ]; then echo 1 > /logs/verifier/reward.txt
  else echo 0 > /logs/verifier/reward.txt; fi
}
