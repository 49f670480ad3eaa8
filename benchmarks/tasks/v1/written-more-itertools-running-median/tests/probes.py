"""Probes of written-more-itertools-running-median: what the workspace's more_itertools answers
(bench/verdict_runner.py).

Fail-to-pass: running_median(..., maxlen=N) yields, per item, the median of exactly the last N items (the
committed version dropped the wrong item from its sorted copy once the window was full, so evicted values stayed).
Pass-to-pass: the unwindowed running median, the middle item (not a float) for odd counts and the mean of the two
middle items for even counts, errors, laziness, and the rest of more_itertools' windowing API.
"""

DATA = [5, 9, 1, 4, 12, 3, 3, 8, -2, 7, 7, 0, 15, 6]


def _mi(ctx):
    return ctx.load("more_itertools")


def _typed(values):
    """[type name, value] per value, so 4 and 4.0 differ."""
    return [[type(v).__name__, v] for v in values]


def probe_window_of_three(ctx):
    return _typed(_mi(ctx).running_median([5, 9, 1, 4, 12, 3, 3, 8], maxlen=3))


def probe_window_of_two(ctx):
    return _typed(_mi(ctx).running_median([1, 10, 3, 3, 20, -4], maxlen=2))


def probe_window_sizes(ctx):
    mi = _mi(ctx)
    return [_typed(mi.running_median(DATA, maxlen=n)) for n in (1, 4, 5, 7)]


def probe_window_with_repeats(ctx):
    return _typed(_mi(ctx).running_median([2, 2, 9, 2, 9, 9, 1, 1, 1, 5], maxlen=3))


def probe_window_of_floats(ctx):
    return _typed(_mi(ctx).running_median([0.5, 2.25, -1.0, 3.5, 3.5, 10.0, 0.1], maxlen=4))


def probe_long_stream_window(ctx):
    import random
    rng = random.Random(7)
    data = [rng.randrange(1000) for _ in range(3000)]
    out = list(_mi(ctx).running_median(data, maxlen=25))
    return [len(out), out[24:40], out[-10:], sum(out)]


def probe_window_of_decimals(ctx):
    from decimal import Decimal
    data = [Decimal(x) for x in ["1.10", "0.30", "2.05", "-4.00", "0.30", "9.99", "1.10"]]
    return [str(v) for v in _mi(ctx).running_median(data, maxlen=3)]


def probe_window_larger_than_input(ctx):
    return _typed(_mi(ctx).running_median([2, 8, 4, 6], maxlen=10))


def probe_unwindowed(ctx):
    mi = _mi(ctx)
    return [_typed(mi.running_median(DATA)), _typed(mi.running_median([5.0, 9.5, 1.2, 4.6])),
            list(mi.running_median([]))]


def probe_odd_counts_yield_items(ctx):
    from fractions import Fraction
    mi = _mi(ctx)
    return [_typed(mi.running_median([3, 1, 2])),
            [str(x) for x in mi.running_median([Fraction(1, 3), Fraction(1, 2), Fraction(1, 4)], maxlen=2)]]


def probe_bad_maxlen(ctx):
    mi = _mi(ctx)
    return [ctx.raises(ValueError, lambda: list(mi.running_median([1, 2], maxlen=0))),
            ctx.raises(ValueError, lambda: list(mi.running_median([1, 2], maxlen=-3)))]


def probe_lazy_on_endless_input(ctx):
    import itertools
    mi = _mi(ctx)
    it = mi.running_median(itertools.cycle([4, 1, 7]), maxlen=3)
    return _typed(itertools.islice(it, 8))


def probe_exported(ctx):
    mi = _mi(ctx)
    star = {}
    exec("from more_itertools import *", star)
    return ["running_median" in star, callable(getattr(mi, "running_median", None))]


def probe_windowed_api_unchanged(ctx):
    mi = _mi(ctx)
    return [list(mi.windowed([1, 2, 3, 4], 3)), list(mi.sliding_window(range(5), 2)),
            list(mi.windowed([1, 2], 3, fillvalue=0)), list(mi.stagger([1, 2, 3], offsets=(0, 1)))]


def probe_grouping_api_unchanged(ctx):
    mi = _mi(ctx)
    return [list(mi.batched(range(7), 3)), [list(c) for c in mi.chunked_even(range(7), 3)],
            list(mi.run_length.encode("aaabcc")), list(mi.distinct_combinations([1, 1, 2], 2))]
