"""Speed and memory scripts: JSON lines of ratios measured side by side in one run (figures: benchmarks/RESULTS.md)."""
