#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
p = "stats/summary.py"
s = open(p).read()
s = s.replace('''def summarize(xs):
    return {"n": len(xs), "mean": mean(xs), "std": math.sqrt(variance(xs)), "min": min(xs), "max": max(xs)}''',
'''def percentile(xs, p):
    """The p-th percentile, interpolating linearly between closest ranks (NumPy's default)."""
    if not xs:
        raise ValueError("percentile of empty data")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is outside [0, 100]")
    data = sorted(xs)
    pos = (len(data) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(xs):
    return percentile(xs, 50)


def summarize(xs):
    return {"n": len(xs), "mean": mean(xs), "std": math.sqrt(variance(xs)), "min": min(xs), "max": max(xs),
            "median": median(xs), "p90": percentile(xs, 90)}''')
open(p, "w").write(s)
PY
