"""Probes of real-sortedcontainers-dict-union: SortedDict under |, |= and reflected | (bench/verdict_runner.py).
Fail-to-pass: the union operators keep the sorted type, its key and dict's precedence; |= keeps the sorted index
consistent. Pass-to-pass: the rest of SortedDict's API, as 2.3.0 already answered it."""


def _sd(ctx):
    return ctx.load("sortedcontainers").SortedDict


def _state(d):
    """[type name, items in iteration order, keys by position, the key function's name]."""
    return [type(d).__name__, list(d.items()), [d.peekitem(i)[0] for i in range(len(d))] if hasattr(d, "peekitem")
            else None, getattr(getattr(d, "key", None), "__name__", None)]


def _neg(x):
    return -x


def probe_or_keeps_type_and_order(ctx):
    sd = _sd(ctx)({3: "c", 1: "a"})
    r = sd | {2: "b", 3: "C"}
    return [_state(r), _state(sd), r is sd]


def probe_or_keeps_key(ctx):
    SortedDict = _sd(ctx)
    sd = SortedDict(_neg, {1: "a", 5: "e"})
    return _state(sd | {3: "c", 9: "i"})


def probe_reflected_or(ctx):
    sd = _sd(ctx)({2: "sorted", 4: "d"})
    return _state({2: "plain", 1: "p"} | sd)


def probe_reflected_or_keeps_key(ctx):
    sd = _sd(ctx)(_neg, {2: "b"})
    return _state({1: "a", 3: "c"} | sd)


def probe_ior_in_place(ctx):
    sd = _sd(ctx)({5: "e", 1: "a"})
    same = sd
    sd |= {3: "c", 5: "E"}
    return [same is sd, _state(sd), sd.bisect_left(4), list(sd.irange(2, 5))]


def probe_ior_pairs(ctx):
    sd = _sd(ctx)({2: "b"})
    sd |= [(9, "i"), (0, "z")]
    return _state(sd)


def probe_ior_keeps_key(ctx):
    sd = _sd(ctx)(_neg, {1: "a"})
    sd |= {7: "g", 4: "d"}
    return [_state(sd), sd.index(4), sd.popitem()]


def probe_or_two_sorted(ctx):
    SortedDict = _sd(ctx)
    a, b = SortedDict({1: "a", 3: "c"}), SortedDict(_neg, {2: "B", 3: "C"})
    return [_state(a | b), _state(b | a)]


def probe_or_rejects_non_mapping(ctx):
    sd = _sd(ctx)({1: "a"})
    return [ctx.raises(TypeError, lambda: sd | [(2, "b")]), ctx.raises(TypeError, lambda: sd | 3),
            ctx.raises(TypeError, lambda: [(2, "b")] | sd)]


def probe_subclass_preserved(ctx):
    SortedDict = _sd(ctx)

    class Registry(SortedDict):
        pass

    r = Registry({2: "b"})
    return [type(r | {1: "a"}).__name__, type({1: "a"} | r).__name__]


def probe_or_empty(ctx):
    SortedDict = _sd(ctx)
    return [_state(SortedDict() | {}), _state(SortedDict({1: 1}) | {}), _state({} | SortedDict())]


def probe_update_unchanged(ctx):
    sd = _sd(ctx)({4: "d"})
    sd.update({2: "b"})
    sd.update([(3, "c")])
    sd[1] = "a"
    return [_state(sd), sd.pop(2), sd.setdefault(9, "i"), _state(sd)]


def probe_views_unchanged(ctx):
    sd = _sd(ctx)({c: i for i, c in enumerate("dbca")})
    return [list(sd.keys()), list(sd.values()), sd.keys()[1], sd.values()[-1], sd.items()[0],
            list(sd.irange("b", "c")), sd.bisect_right("b")]


def probe_copy_and_fromkeys_unchanged(ctx):
    SortedDict = _sd(ctx)
    sd = SortedDict(_neg, {1: 1, 2: 2})
    c = sd.copy()
    return [_state(c), _state(SortedDict.fromkeys([3, 1, 2], 0)), repr(SortedDict({1: "a"}))]
