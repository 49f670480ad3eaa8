"""Probes of feature-kv-ttl: a store driven by a fake clock (bench/verdict_runner.py)."""


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _store(ctx):
    clock = Clock()
    return clock, ctx.load("kv").Store(clock=clock)


def probe_expiry(ctx):
    clock, s = _store(ctx)
    s.set("a", 1, ttl=10)
    s.set("b", 2)
    clock.now += 9.5
    out = [s.get("a"), len(s), s.keys(), round(s.ttl("a"), 7)]
    clock.now += 0.5
    out += [s.get("a"), s.get("a", "gone"), "a" in s, len(s), s.keys(), ctx.raises(KeyError, s.delete, "a"),
            ctx.raises(KeyError, s.ttl, "a"), s.ttl("b")]
    return out


def probe_reset_replaces_expiry(ctx):
    clock, s = _store(ctx)
    s.set("k", 1, ttl=5)
    clock.now += 4
    s.set("k", 2, ttl=5)
    clock.now += 4
    out = [s.get("k")]
    s.set("k", 3)
    clock.now += 1000
    return out + [s.get("k")]


def probe_purge(ctx):
    clock, s = _store(ctx)
    for i in range(5):
        s.set(i, i, ttl=i + 1)
    s.set("forever", 0)
    clock.now += 3
    return [s.purge(), s.purge(), len(s), "forever" in s]


def probe_bad_ttl(ctx):
    _, s = _store(ctx)
    return [ctx.raises(ValueError, s.set, "x", 1, ttl=bad) for bad in (0, -1)]


def probe_default_clock(ctx):
    s = ctx.load("kv").Store()
    s.set("x", 1, ttl=60)
    return s.get("x")
