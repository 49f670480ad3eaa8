#!/bin/bash
# The verifier starts the service the agent wrote: no process of the agent's turn survives into grading.
cd /app && nohup python3 /app/server.py > /logs/verifier/server.log 2>&1 &
for i in $(seq 50); do curl -s --noproxy '*' --max-time 1 http://127.0.0.1:8080/health > /dev/null && break; sleep 0.1; done
body=$(curl -s --noproxy '*' --max-time 5 http://127.0.0.1:8080/health)
if [ "$body" = "ok" ]; then echo 1 > /logs/verifier/reward.txt; else echo "got: $body"; echo 0 > /logs/verifier/reward.txt; fi
