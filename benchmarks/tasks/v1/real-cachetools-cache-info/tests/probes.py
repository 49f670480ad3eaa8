"""Probes of real-cachetools-cache-info: what the workspace's cachetools (src/ layout) answers
(bench/verdict_runner.py).

Fail-to-pass (cachetools 5.3.0): cached(cache, ..., info=True) counts hits and misses and answers cache_info() as
(hits, misses, maxsize, currsize) — the cache's maxsize and currsize for a cachetools cache, None and len() for a
plain mapping, 0 and 0 without a cache — with or without a lock; cache_clear() resets the counts. Pass-to-pass:
cached without info, the functools-style decorators of cachetools.func, cachedmethod and the cache classes, as
5.2.1 answered them.
"""


def _ct(ctx):
    import sys
    src = ctx.path("src")
    if src not in sys.path:
        sys.path.append(src)  # after the standard library: the workspace shadows nothing
    return ctx.load("cachetools")


def _info(fn):
    ci = fn.cache_info()
    return [ci.hits, ci.misses, ci.maxsize, ci.currsize, list(ci)]


def _counted(ctx, cache, **kw):
    ct = _ct(ctx)
    calls = []

    @ct.cached(cache, info=True, **kw)
    def square(x):
        calls.append(x)
        return x * x

    return square, calls


def probe_info_lru(ctx):
    ct = _ct(ctx)
    f, calls = _counted(ctx, ct.LRUCache(maxsize=2))
    out = [f(x) for x in [1, 2, 1, 3, 2, 1, 1]]
    return [out, calls, _info(f)]


def probe_info_plain_dict(ctx):
    f, calls = _counted(ctx, {})
    [f(x) for x in [1, 2, 1, 2, 5]]
    return [calls, _info(f)]


def probe_info_without_cache(ctx):
    f, calls = _counted(ctx, None)
    [f(x) for x in [1, 1, 2]]
    ci = f.cache_info()
    return [calls, ci.hits, ci.misses]


def probe_info_custom_mapping(ctx):
    import collections

    class Store(collections.UserDict):
        pass

    f, _ = _counted(ctx, Store())
    [f(x) for x in [4, 4, 4, 5]]
    return _info(f)


def probe_info_reset_by_clear(ctx):
    ct = _ct(ctx)
    f, calls = _counted(ctx, ct.LFUCache(maxsize=10))
    [f(x) for x in [1, 1, 2]]
    before = _info(f)
    f.cache_clear()
    after = _info(f)
    f(1)
    return [before, after, _info(f), calls]


def probe_info_with_lock(ctx):
    import threading
    ct = _ct(ctx)
    f, calls = _counted(ctx, ct.TTLCache(maxsize=5, ttl=600), lock=threading.RLock())
    [f(x) for x in [3, 3, 4, 3]]
    before = _info(f)
    f.cache_clear()
    return [before, _info(f), calls, f.cache_lock is not None]


def probe_info_threads(ctx):
    import threading
    ct = _ct(ctx)
    f, _ = _counted(ctx, ct.LRUCache(maxsize=100), lock=threading.Lock())
    workers = [threading.Thread(target=lambda: [f(i % 10) for i in range(200)]) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    hits, misses, maxsize, currsize, _ = _info(f)
    return [hits + misses, maxsize, currsize, misses >= 10]


def probe_info_value_too_large(ctx):
    ct = _ct(ctx)
    g = ct.cached(ct.LRUCache(maxsize=3, getsizeof=len), info=True)(lambda s: s * 2)
    [g(s) for s in ["a", "a", "bb", "bb"]]
    return _info(g)


def probe_info_custom_key_and_errors(ctx):
    ct = _ct(ctx)
    seen = []

    @ct.cached({}, key=lambda x, verbose=False: x, info=True)
    def half(x, verbose=False):
        seen.append(x)
        if x % 2:
            raise ValueError(x)
        return x // 2

    out = [half(4), half(4, verbose=True), ctx.raises(ValueError, half, 3), ctx.raises(ValueError, half, 3)]
    return [out, seen, _info(half)]


def probe_cached_without_info(ctx):
    ct = _ct(ctx)
    calls = []

    @ct.cached(ct.LRUCache(maxsize=2))
    def inc(x):
        calls.append(x)
        return x + 1

    out = [inc(1), inc(1), inc(2), inc(3), inc(1)]
    inc.cache_clear()
    inc(2)
    return [out, calls, len(inc.cache), inc.__name__, inc.cache_key is ct.keys.hashkey]


def probe_func_decorators_info(ctx):
    _ct(ctx)
    func = ctx.load("cachetools.func")
    out = []
    for name in ["lru_cache", "lfu_cache", "fifo_cache", "rr_cache", "mru_cache", "ttl_cache"]:
        @getattr(func, name)(maxsize=2)
        def f(x):
            return x * 3

        [f(x) for x in [1, 1, 2, 3, 1]]
        ci = f.cache_info()
        out.append([name, ci.hits + ci.misses, ci.maxsize, ci.currsize, f.cache_parameters()])
    return out


def probe_func_lru_details(ctx):
    _ct(ctx)
    func = ctx.load("cachetools.func")

    @func.lru_cache(maxsize=2)
    def f(x):
        return x

    [f(x) for x in [1, 2, 1, 3, 1, 2]]
    first = list(f.cache_info())
    f.cache_clear()

    @func.lru_cache(maxsize=None)
    def g(x):
        return x

    [g(x) for x in range(5)] + [g(0)]

    @func.lru_cache
    def h(x):
        return x

    h(1)
    h(1)

    @func.lru_cache(maxsize=4, typed=True)
    def t(x):
        return x

    t(1)
    t(1.0)
    t(1)
    return [first, list(f.cache_info()), list(g.cache_info()), list(h.cache_info()), list(t.cache_info()),
            t.cache_parameters(), h.__wrapped__(7)]


def probe_cachedmethod(ctx):
    import operator
    ct = _ct(ctx)

    class Fib:
        def __init__(self):
            self.cache = ct.LRUCache(maxsize=50)
            self.calls = 0

        @ct.cachedmethod(operator.attrgetter("cache"))
        def fib(self, n):
            self.calls += 1
            return n if n < 2 else self.fib(n - 1) + self.fib(n - 2)

    a = Fib()
    return [a.fib(30), a.calls, len(a.cache), a.fib(30), a.calls]


def probe_cache_classes(ctx):
    ct = _ct(ctx)
    lru = ct.LRUCache(maxsize=2)
    lru["a"], lru["b"] = 1, 2
    lru["a"]
    lru["c"] = 3
    now = [0]
    ttl = ct.TTLCache(maxsize=3, ttl=10, timer=lambda: now[0])
    ttl["x"] = 1
    now[0] = 5
    ttl["y"] = 2
    now[0] = 12
    alive = sorted(ttl)
    lfu = ct.LFUCache(maxsize=2)
    lfu["p"], lfu["q"] = 1, 2
    lfu["p"], lfu["p"]
    lfu["r"] = 3
    return [sorted(lru), lru.currsize, lru.maxsize, alive, sorted(lfu), repr(ct.Cache(maxsize=3))]


def probe_info_typed_key(ctx):
    ct = _ct(ctx)
    f, calls = _counted(ctx, ct.FIFOCache(maxsize=8), key=ct.keys.typedkey)
    [f(x) for x in [2, 2.0, 2, True, 1]]
    return [calls, _info(f)]


def probe_keys(ctx):
    ct = _ct(ctx)
    k = ct.keys
    return [k.hashkey(1, 2, a=3) == k.hashkey(1, 2, a=3), k.hashkey(1) == k.hashkey(1.0),
            k.typedkey(1) == k.typedkey(1.0), hash(k.hashkey(1, "x")) == hash(k.hashkey(1, "x")),
            k.methodkey(object(), 5) == k.hashkey(5), len(k.hashkey(1, 2, a=3))]
