"""Probes of feature-stats-percentile: medians, percentiles and summaries (bench/verdict_runner.py; floats are
compared within 1e-9, see check.json)."""

import random


def probe_median(ctx):
    median = ctx.load("stats.summary").median
    return [median([3, 1, 2]), median([4, 1, 3, 2]), median([7])]


def probe_known_values(ctx):
    percentile = ctx.load("stats.summary").percentile
    xs = [15, 20, 35, 40, 50]
    return [float(percentile(xs, p)) for p in (0, 100, 40, 90)] + [float(percentile([1, 2, 3, 4], 25))]


def probe_random(ctx):
    percentile = ctx.load("stats.summary").percentile
    rng, out = random.Random(1), []
    for _ in range(200):
        xs = [rng.uniform(-100, 100) for _ in range(rng.randint(1, 30))]
        p = rng.choice([0, 1, 12.5, 50, 90, 99, 100, rng.uniform(0, 100)])
        out.append(float(percentile(xs, p)))
    return out


def probe_errors_and_no_mutation(ctx):
    m = ctx.load("stats.summary")
    out = [ctx.raises(ValueError, m.median, []), ctx.raises(ValueError, m.percentile, [], 50),
           ctx.raises(ValueError, m.percentile, [1], -1), ctx.raises(ValueError, m.percentile, [1], 100.5)]
    xs = [3, 1, 2]
    m.percentile(xs, 50)
    return out + [xs]


def probe_summary(ctx):
    s = ctx.load("stats.summary").summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    return [float(s["median"]), float(s["p90"]), s["n"]]
