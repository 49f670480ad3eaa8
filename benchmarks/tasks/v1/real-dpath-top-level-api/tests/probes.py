"""Probes of real-dpath-top-level-api: what the workspace's dpath answers (bench/verdict_runner.py).

Fail-to-pass (dpath 2.1.0, which the history commit's README and tests show): new, delete, set, get, values, search
and merge at the package's top level, answering as dpath.util's did (string and list paths, separators, filters,
defaults, creators, the errors); the merge flags as a flag enum, MergeType (ADDITIVE, REPLACE, TYPESAFE),
importable from the package (exact values not asked); segments.make_walkable (segments.kvs renamed); dpath.util
kept for existing callers, each of its functions answering as before but warning (DeprecationWarning).
Pass-to-pass: dpath.util's answers without flags and dpath.segments' helpers as dpath 2.0.8 gave them (walk, leaf,
leafy, has, get, expand, types, leaves, match, extend, set, fold, view), the exceptions and the empty-key option,
asked only where 2.0.8 and 2.1.0 answer alike (never dpath.util.merge's return value, a tuple in 2.1.0).
"""

import copy
import os
import sys
import warnings


def _dpath(ctx, sub=None):
    """The workspace's dpath package (or one of its modules), never an installed copy."""
    root = ctx.workspace
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("dpath")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("dpath came from %s, not the workspace" % mod.__file__)
    return ctx.load("dpath." + sub) if sub else mod


def _call(fn, *args, **kwargs):
    """fn's result, or [exception name]; with ["DeprecationWarning"] if it gave one (or a subclass)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn(*args, **kwargs)
            if type(out).__name__ == "generator":
                out = [list(p) for p in out]
        except Exception as e:  # noqa: BLE001 - which exception is the answer
            out = [type(e).__name__]
    dep = any(issubclass(w.category, DeprecationWarning) for w in caught)
    return [out, ["DeprecationWarning"]] if dep else out


def _doc():
    """The README's example document."""
    return {"a": {"b": {"3": 2, "43": 30, "c": [], "d": ["red", "buggy", "bumpers"]}}}


def _api(ctx):
    """The package's top-level functions, or None where one is missing."""
    dpath = _dpath(ctx)
    return {n: getattr(dpath, n, None) for n in ("new", "delete", "set", "get", "values", "search", "merge")}


# --------------------------------------------------------------------------------------------- fail-to-pass


def probe_top_level_functions(ctx):
    dpath = _dpath(ctx)
    util = _dpath(ctx, "util")
    return [[n, callable(getattr(dpath, n, None)), getattr(dpath, n, None) is not getattr(util, n)]
            for n in ("new", "delete", "set", "get", "values", "search", "merge")]


def probe_top_level_get(ctx):
    api = _api(ctx)
    x = _doc()
    return [_call(api["get"], x, "/a/b/43"), _call(api["get"], x, "a/b/d/1"), _call(api["get"], x, "/a/b/c"),
            _call(api["get"], x, "a.b.43", separator="."), _call(api["get"], x, ["a", "b", "3"]),
            _call(api["get"], x, "/a/b/zz"), _call(api["get"], x, "/a/b/zz", default="dflt"),
            _call(api["get"], x, "/a/b/*"), _call(api["get"], x, "/"), _call(api["get"], x, "a/b/d/9", default=None)]


def probe_top_level_search(ctx):
    api = _api(ctx)
    x = _doc()
    return [_call(api["search"], x, "a/b/[cd]"), _call(api["search"], x, "a/b/[cd]", yielded=True),
            _call(api["search"], x, "**", afilter=lambda v: isinstance(v, int) and v > 5),
            _call(api["search"], x, "a/b/*", dirs=False), _call(api["search"], x, "a;b;d;*", separator=";"),
            _call(api["search"], x, ["a", "b", "4*"]), _call(api["search"], x, "/nothing/**"),
            _call(api["search"], x, "**/d/*", yielded=True)]


def probe_top_level_values(ctx):
    api = _api(ctx)
    x = _doc()
    return [_call(api["values"], x, "/a/b/d/*"), _call(api["values"], x, "a/b/*", dirs=False),
            _call(api["values"], x, "**", afilter=lambda v: v == "buggy"), _call(api["values"], x, "/q/*")]


def probe_top_level_new_and_set(ctx):
    api = _api(ctx)
    x = _doc()
    out = [_call(api["set"], x, "a/b/[cd]", "Waffles"), copy.deepcopy(x),
           _call(api["new"], x, "a/b/e/f/g", "Roffle"), copy.deepcopy(x["a"]["b"]["e"]),
           _call(api["new"], x, "a/b/e/f/h", [])]
    _call(api["new"], x, "a/b/e/f/h/3", "lonely")
    out.append(x["a"]["b"]["e"]["f"]["h"])
    out.append(_call(api["set"], x, "a/b/zz", 1))
    out.append(_call(api["set"], x, "a/b/*", 0, afilter=lambda v: v == 30))
    out.append(x["a"]["b"]["43"])
    y = {}
    _call(api["new"], y, "p.q.0", "first", separator=".")
    out.append(y)
    return out


def probe_top_level_new_creator(ctx):
    api = _api(ctx)
    calls = []

    def creator(current, segments, i, hints=()):
        calls.append([list(segments), i])
        current[segments[i]] = {"made": True}

    d = {}
    out = [_call(api["new"], d, "/a/b", 3, creator=creator), d, calls]
    e = {}
    _call(api["new"], e, ["x", 2], "v")
    out.append(e)
    return out


def probe_top_level_delete(ctx):
    api = _api(ctx)
    x = _doc()
    out = [_call(api["delete"], x, "a/b/d/1"), copy.deepcopy(x), _call(api["delete"], x, "a/b/[34]*"),
           copy.deepcopy(x), _call(api["delete"], x, "a/b/nope"),
           _call(api["delete"], x, "a/b/*", afilter=lambda v: v == []), copy.deepcopy(x)]
    return out


def probe_merge_type_enum(ctx):
    dpath = _dpath(ctx)
    mt = getattr(dpath, "MergeType", None)
    import enum
    return [isinstance(mt, type) and issubclass(mt, enum.Flag),
            sorted(m.name for m in mt), bool(mt.ADDITIVE & (mt.ADDITIVE | mt.TYPESAFE)),
            bool(mt.REPLACE & (mt.ADDITIVE | mt.TYPESAFE)), len({mt.ADDITIVE, mt.REPLACE, mt.TYPESAFE})]


def probe_top_level_merge(ctx):
    dpath = _dpath(ctx)
    api = _api(ctx)
    mt = dpath.MergeType
    out = []
    for flags in (None, mt.ADDITIVE, mt.REPLACE, mt.TYPESAFE, mt.ADDITIVE | mt.TYPESAFE, mt.REPLACE | mt.TYPESAFE):
        dst = {"a": [0, 1], "b": {"c": 1, "d": "x"}, "e": 1}
        src = {"a": [2], "b": {"c": 2, "f": [1]}, "g": {"h": 1}}
        kw = {} if flags is None else {"flags": flags}
        r = _call(api["merge"], dst, src, **kw)
        out.append([r is dst or r, dst])
        dst2, src2 = {"k": {"x": 1}}, {"k": [1]}
        out.append([_call(api["merge"], dst2, src2, **kw) is dst2, dst2])
    dst3 = {}
    api["merge"](dst3, {"a": {"b": 1, "c": 2}, "z": 3}, afilter=lambda v: v == 2)
    dst4 = {}
    api["merge"](dst4, {"a;b": 1, "q": {"r;s": 2}}, separator=";")
    out.append([dst3, dst4])
    return out


def probe_make_walkable(ctx):
    segments = _dpath(ctx, "segments")
    walk = segments.make_walkable
    return [sorted(walk({"a": 1, "b": [2]})), list(walk([5, 6, 7])), list(walk(("t", "u"))),
            list(walk(1)), list(walk("str"))]


def probe_util_deprecated_but_working(ctx):
    util = _dpath(ctx, "util")
    x = _doc()
    out = [_call(util.get, x, "/a/b/43"), _call(util.search, x, "a/b/[cd]"), _call(util.values, x, "/a/b/d/*"),
           _call(util.set, x, "a/b/43", 31), _call(util.new, x, "a/b/n", 1), _call(util.delete, x, "a/b/n")]
    dst = {"a": [1]}
    merged = _call(util.merge, dst, {"a": [2], "b": 3})
    out.append([merged[1] if isinstance(merged, list) and len(merged) == 2 and isinstance(merged[1], list)
                else None, dst])
    out.append(_call(util.get, x, "/a/b/missing", default=7))
    return out


def probe_util_merge_with_enum_flags(ctx):
    dpath = _dpath(ctx)
    util = _dpath(ctx, "util")
    mt = dpath.MergeType
    out = []
    for flags in (mt.REPLACE, mt.ADDITIVE, mt.TYPESAFE):
        dst = {"a": [0], "b": {"c": 1}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                util.merge(dst, {"a": [1], "b": [2]}, flags=flags)
                out.append(dst)
            except Exception as e:  # noqa: BLE001
                out.append(type(e).__name__)
    return out


# --------------------------------------------------------------------------------------------- pass-to-pass


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(*args, **kwargs)
            if type(out).__name__ == "generator":
                out = [list(p) for p in out]
            return out
        except Exception as e:  # noqa: BLE001 - which exception is the answer
            return [type(e).__name__]


def probe_util_answers(ctx):
    util = _dpath(ctx, "util")
    x = _doc()
    return [_quiet(util.get, x, "a/b/d/2"), _quiet(util.get, x, "a/b/*"), _quiet(util.get, x, "/a/x"),
            _quiet(util.search, x, "**/d/*", yielded=True), _quiet(util.search, x, "a/b/*", dirs=False),
            _quiet(util.values, x, "a/b/*", afilter=lambda v: isinstance(v, int)),
            _quiet(util.set, x, "a/b/d/*", "z"), x, _quiet(util.delete, x, "a/b/c"), x,
            _quiet(util.delete, x, "a/q")]


def probe_util_new_and_merge_defaults(ctx):
    util = _dpath(ctx, "util")
    d = {}
    _quiet(util.new, d, "a/b/0", "zero")
    _quiet(util.new, d, "a/c/2", "two")
    _quiet(util.new, d, ["k", "l/m"], "slash")
    dst = {"a": [1], "b": {"c": 1}}
    _quiet(util.merge, dst, {"a": [2], "b": {"d": 2}, "e": None})
    return [d, dst]


def probe_segments_walk_and_leaves(ctx):
    seg = _dpath(ctx, "segments")
    doc = {"a": [1, {"b": 2}], "c": "s", "d": {}}
    return [sorted([list(p), v] for p, v in seg.walk(doc) if seg.leaf(v)), sorted(
        [list(p), v] for p, v in seg.leaves(doc)), [seg.leaf(v) for v in (1, "s", b"b", None, 1.5, True, [], {})],
        [seg.leafy(v) for v in (1, [], {}, [1], {"a": 1})]]


def probe_segments_get_has_types(ctx):
    seg = _dpath(ctx, "segments")
    doc = {"a": [1, {"b": 2}], "c": "s"}
    return [seg.get(doc, ("a", 1, "b")), seg.has(doc, ("a", 1, "b")), seg.has(doc, ("a", 5)),
            seg.has(doc, ("c", "x")), [[k, t.__name__] for k, t in seg.types(doc, ("a", 1, "b"))],
            _quiet(seg.get, doc, ("c", "x")), _quiet(seg.get, doc, ("z",))]


def probe_segments_match_expand(ctx):
    seg = _dpath(ctx, "segments")
    return [seg.match(("a", "b"), ("a", "*")), seg.match(("a", "b", "c"), ("**",)), seg.match(("a", 1), ("a", "1")),
            seg.match(("a", "b"), ("a", "b", "c")), seg.match(("x", "yz"), ("x", "y?")),
            [list(e) for e in seg.expand(("a", "b", "c"))], seg.int_str(3), seg.int_str("q"),
            _quiet(seg.match, ("a",), ("**", "**"))]


def probe_segments_set_extend_fold(ctx):
    seg = _dpath(ctx, "segments")
    d = {}
    seg.set(d, ("a", "b"), 1)
    seg.set(d, ("l",), [])
    seg.set(d, ("l", 2), "x")
    ext = [1]
    seg.extend(ext, 3, "pad")
    total = seg.fold({"a": 1, "b": [2, 3]}, lambda o, pair, acc: acc.append(pair[1]) if seg.leaf(pair[1]) else None,
                     [])
    return [d, ext, sorted(total), seg.view({"a": {"b": 1, "c": 2}, "d": 3}, ("a", "b"))]


def probe_errors_and_options(ctx):
    dpath = _dpath(ctx)
    exc = _dpath(ctx, "exceptions")
    opts = _dpath(ctx, "options")
    seg = _dpath(ctx, "segments")
    names = ["InvalidGlob", "PathNotFound", "InvalidKeyName", "FilteredValueOnly"]
    out = [[n, hasattr(exc, n)] for n in names]
    out.append(_quiet(lambda: list(seg.walk({"": 1}))))
    before = opts.ALLOW_EMPTY_STRING_KEYS
    try:
        opts.ALLOW_EMPTY_STRING_KEYS = True
        out.append(_quiet(lambda: [[list(p), v] for p, v in seg.walk({"": 1})]))
    finally:
        opts.ALLOW_EMPTY_STRING_KEYS = before
    out.append(dpath.options is opts)
    return out
