#!/bin/bash
body=$(curl -s --noproxy '*' --max-time 5 http://127.0.0.1:8080/health)
if [ "$body" = "ok" ]; then echo 1 > /logs/verifier/reward.txt; else echo "got: $body"; echo 0 > /logs/verifier/reward.txt; fi
