"""Learning runs: what training (or one batch of rollouts) buys on the toy, JSON lines (benchmarks/RESULTS.md)."""
