"""Probes of written-funcy-memoize-maxsize: what the workspace's funcy answers (bench/verdict_runner.py).

Fail-to-pass: @memoize(maxsize=N) forgets the least recently *used* result first, and a result returned from
memory counts as a use -- the feature refreshed recency only through .memory.get(), which the memoizing wrapper
never calls, so it forgot the oldest *stored* result and kept recomputing hot keys; with key_func, keyword calls
and invalidation too. Pass-to-pass: what the feature already did right (the bound, the order without hits,
memoize.skip, maxsize validation), unbounded @memoize (keyword and positional calls are different keys, as
documented), @cache, the lookupers and other funcy helpers as funcy 2.0 answered them.
"""

import os
import sys


def _fc(ctx):
    """The workspace's funcy (imported from the repository root, never an installed copy)."""
    root = ctx.path(".")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("funcy")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("funcy came from %s, not the workspace" % mod.__file__)
    return mod


def _counted(fc, **kw):
    calls = []

    @fc.memoize(**kw)
    def f(*args, **kwargs):
        calls.append([list(args), sorted(kwargs.items())])
        return [args, kwargs]

    return f, calls


def probe_hit_is_a_use(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc, maxsize=2)
    for x in (0, 1, 0, 2, 0, 1):
        f(x)
    return [[c[0][0] for c in calls], list(f.memory)]


def probe_hot_key_survives(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc, maxsize=3)
    for cold in range(20):
        f("EUR")
        f("cold%d" % cold)
    return [sum(1 for c in calls if c[0] == ["EUR"]), len(calls), list(f.memory)[-2:]]


def probe_maxsize_one(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc, maxsize=1)
    for x in "aab" + "bba":
        f(x)
    return [[c[0][0] for c in calls], list(f.memory)]


def probe_hits_with_key_func(ctx):
    fc = _fc(ctx)
    calls = []

    @fc.memoize(key_func=lambda s, verbose=False: s.lower(), maxsize=2)
    def norm(s, verbose=False):
        calls.append(s)
        return s.lower()

    for s in ("A", "b", "a", "C", "A", "B"):
        norm(s, verbose=True)
    return [calls, list(norm.memory)]


def probe_hits_with_keyword_calls(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc, maxsize=2)
    f(1, by=2)
    f(3)
    f(1, by=2)
    f(4)
    f(1, by=2)
    f(3)
    return [len(calls), [list(k) for k in f.memory]]


def probe_memory_order_after_hits(ctx):
    fc = _fc(ctx)
    f, _ = _counted(fc, maxsize=4)
    for x in (1, 2, 3, 4, 2, 1, 3):
        f(x)
    out = [list(f.memory)]
    f(5)
    return out + [list(f.memory), (4,) in f.memory]


def probe_invalidate_then_hits(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc, maxsize=3)
    for x in (1, 2, 3):
        f(x)
    f.invalidate(2)
    f(1)
    f(4)
    f(5)
    f(1)
    return [[c[0][0] for c in calls], list(f.memory)]


def probe_method_like_usage(ctx):
    fc = _fc(ctx)
    seen = []

    class Rates:
        @fc.memoize(maxsize=2)
        def rate(currency, day):
            seen.append((currency, day))
            return len(currency) * day

    for day in range(1, 6):
        Rates.rate("USD", 1)
        Rates.rate("GBP", day)
    return [len(seen), seen.count(("USD", 1))]


def probe_memory_get_counts(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc, maxsize=2)
    f(1)
    f(2)
    got = f.memory.get((1,))
    f(3)
    return [got, list(f.memory), f.memory.get((9,), "none"), len(calls)]


def probe_bound_without_hits(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc, maxsize=3)
    for x in range(7):
        f(x)
    return [len(f.memory), list(f.memory), len(calls)]


def probe_skip_and_validation(ctx):
    fc = _fc(ctx)

    @fc.memoize(maxsize=2)
    def div(a, b):
        if b == 0:
            raise fc.memoize.skip("inf")
        return a // b

    out = [div(1, 0), div(4, 2), len(div.memory), div(1, 0), len(div.memory)]
    return out + [ctx.message(ValueError, fc.memoize, maxsize=0), ctx.message(ValueError, fc.memoize, maxsize=-3)]


def probe_invalidate_all_and_clear(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc, maxsize=2)
    f(1)
    f(2)
    f.invalidate_all()
    out = [len(f.memory)]
    f(1)
    f.memory.clear()
    f(1)
    return out + [len(calls), list(f.memory)]


def probe_unbounded_memoize(ctx):
    fc = _fc(ctx)
    f, calls = _counted(fc)
    f(0)
    f(0)
    f(x=0)
    f(x=0)
    f(0, by=1)
    f(0, 1)
    for x in range(300):
        f(x)
    muls = []

    @fc.memoize
    def mul(x, by=1):
        muls.append([x, by])
        return x * by

    for args, kwargs in (((0,), {}), ((0, 1), {}), ((0,), {"by": 1}), ((), {"x": 0}), ((0,), {})):
        mul(*args, **kwargs)
    return [len(calls), len(f.memory), type(f.memory).__name__, [list(k) for k in list(f.memory)[:4]], muls]


def probe_cache_timeout(ctx):
    fc = _fc(ctx)
    calls = []

    @fc.cache(60)
    def slow(x):
        calls.append(x)
        return x * 2

    out = [slow(1), slow(1), slow(2)]
    slow.invalidate(1)
    out.append(slow(1))
    slow.invalidate_all()
    out.append(slow(2))
    return out + [calls]


def probe_lookupers(ctx):
    fc = _fc(ctx)

    @fc.make_lookuper
    def letters():
        return {c: i for i, c in enumerate("abc")}

    @fc.silent_lookuper
    def squares(n):
        return [(i, i * i) for i in range(n)]

    return [letters("b"), ctx.message(LookupError, letters, "z"), squares(4)(3), squares(4)(9)]


def probe_other_helpers(ctx):
    fc = _fc(ctx)
    return [fc.lmap(fc.inc, [1, 2]), fc.merge_with(sum, {1: 1}, {1: 2}), dict(fc.group_by(len, ["a", "bb", "c"])),
            [list(c) for c in fc.lchunks(2, range(5))], fc.get_lax({"a": [1]}, ["a", 0]), fc.once(lambda: 1)()]
