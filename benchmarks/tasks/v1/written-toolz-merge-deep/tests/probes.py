"""Probes of written-toolz-merge-deep: what the workspace's toolz answers (bench/verdict_runner.py).

Fail-to-pass: merge_deep's result shares no mapping with its inputs at any depth -- a mapping that only one input
holds at a key is copied too (the feature kept it as it was, so whoever changed the merged result changed the
defaults behind it) -- every mapping of the result is made by `factory`, and values that are not mappings are kept
as the very objects the inputs hold; the same through toolz.curried. Pass-to-pass: what merge_deep already did
right (precedence, nesting, replacement rules, inputs left alone by the merge itself, argument forms), merge,
merge_with and the rest of dicttoolz and of toolz.curried as toolz 0.12.1 answered them.
"""

import collections
import sys
import types


def _tz(ctx):
    """The workspace's toolz (imported from the repository root, never an installed copy)."""
    import os

    root = ctx.path(".")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("toolz")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("toolz came from %s, not the workspace" % mod.__file__)
    return mod


def _plain(x):
    """A mapping tree as plain dicts, each level tagged with its type's name."""
    if isinstance(x, collections.abc.Mapping):
        return {"__type__": type(x).__name__, "items": [[repr(k), _plain(v)] for k, v in x.items()]}
    return x


def _defaults():
    return {"db": {"host": "localhost", "port": 5432, "pool": {"min": 1, "max": 10}},
            "cache": {"ttl": 60}, "debug": False, "tags": ["base"]}


def probe_changing_the_result_leaves_defaults(ctx):
    tz = _tz(ctx)
    defaults = _defaults()
    merged = tz.merge_deep(defaults, {"db": {"port": 6432}})
    merged["cache"]["ttl"] = 5  # only the defaults hold "cache"
    merged["db"]["pool"]["max"] = 99  # only the defaults hold "pool", below a merged level
    return [defaults == _defaults(), defaults["cache"], defaults["db"]["pool"]]


def probe_lone_mapping_is_a_copy(ctx):
    tz = _tz(ctx)
    a, b = {"x": {"y": 1}}, {"z": {"w": 2}}
    merged = tz.merge_deep(a, b)
    return [merged["x"] is a["x"], merged["z"] is b["z"], merged == {"x": {"y": 1}, "z": {"w": 2}}]


def probe_single_input_is_copied(ctx):
    tz = _tz(ctx)
    src = {"a": {"b": {"c": 1}}, "d": 2}
    out = [tz.merge_deep(src) is src, tz.merge_deep(src)["a"] is src["a"],
           tz.merge_deep([src])["a"]["b"] is src["a"]["b"]]
    copy = tz.merge_deep(src)
    copy["a"]["b"]["c"] = 100
    return out + [src["a"]["b"]["c"]]


def probe_no_mapping_shared_at_any_depth(ctx):
    tz = _tz(ctx)
    a = {"l1": {"l2": {"l3": {"v": 1}, "k": 0}}}
    b = {"l1": {"l2": {"k": 5}}, "other": {"deep": {"x": [1]}}}
    merged = tz.merge_deep(a, b)
    seen = []

    def walk(node, path):
        for k, v in node.items():
            if isinstance(v, dict):
                for src, name in ((a, "a"), (b, "b")):
                    ref = src
                    for p in path + [k]:
                        ref = ref.get(p) if isinstance(ref, dict) else None
                    if ref is v:
                        seen.append(name + ":" + "/".join(path + [k]))
                walk(v, path + [k])

    walk(merged, [])
    return [sorted(seen), merged["l1"]["l2"]["l3"], merged["l1"]["l2"]["k"]]


def probe_factory_at_every_depth(ctx):
    tz = _tz(ctx)
    od = collections.OrderedDict
    merged = tz.merge_deep({"a": {"b": {"c": 1}}, "x": {"y": 1}}, {"x": {"z": 2}}, factory=od)
    dd = tz.merge_deep({"n": {"m": {}}}, factory=lambda: collections.defaultdict(int))
    return [_plain(merged), _plain(dd), dd["n"]["m"]["missing"]]


def probe_leaf_values_kept(ctx):
    tz = _tz(ctx)
    tags, owners, nested_list = ["a"], frozenset({"ann"}), [{"inner": 1}]
    a = {"meta": {"tags": tags, "owners": owners}, "rows": nested_list}
    merged = tz.merge_deep(a, {"meta": {"extra": 1}})
    return [merged["meta"]["tags"] is tags, merged["meta"]["owners"] is owners, merged["rows"] is nested_list,
            merged["rows"][0] is nested_list[0]]


def probe_read_only_mappings(ctx):
    tz = _tz(ctx)
    frozen = types.MappingProxyType({"b": 1})
    merged = tz.merge_deep({"a": frozen}, {"a": {"c": 2}})
    alone = tz.merge_deep({"a": types.MappingProxyType({"b": {"c": 1}})}, {"d": 1})
    alone["a"]["b"]["c"] = 2  # a copy of our own, writable
    return [_plain(merged), _plain(alone), dict(frozen)]


def probe_curried_partial_reused(ctx):
    tz = _tz(ctx)
    cur = ctx.load("toolz.curried")
    defaults = _defaults()
    with_dicts = cur.merge_deep(factory=dict)
    first = with_dicts(defaults, {"db": {"host": "db1"}})
    first["cache"]["ttl"] = 1
    second = with_dicts(defaults, {"debug": True})
    return [second["cache"], second["db"]["host"], defaults == _defaults(), isinstance(with_dicts, tz.curry),
            cur.merge_deep({"a": {"b": 1}}, {"a": {"c": 2}})]


def probe_replacement_then_mapping(ctx):
    tz = _tz(ctx)
    a, c = {"x": {"y": 1}}, {"x": {"z": 2}}
    merged = tz.merge_deep(a, {"x": 5}, c)
    merged["x"]["z"] = 20
    b = {"x": {"y": {"z": 1}}}
    return [merged, c, tz.merge_deep({"x": 1}, b)["x"]["y"] is b["x"]["y"]]


def probe_precedence_and_nesting(ctx):
    tz = _tz(ctx)
    return [tz.merge_deep(_defaults(), {"db": {"port": 6432, "pool": {"max": 20}}}, {"debug": True}),
            tz.merge_deep({1: 1}, {2: 2}, {1: 10}), tz.merge_deep()]


def probe_replacement_rules(ctx):
    tz = _tz(ctx)
    return [tz.merge_deep({"a": {"b": 1}}, {"a": 2}), tz.merge_deep({"a": [1]}, {"a": [2]}),
            tz.merge_deep({"a": {"b": 1}}, {"a": None}), tz.merge_deep({"a": None}, {"a": {"b": 1}})]


def probe_merge_leaves_inputs_alone(ctx):
    tz = _tz(ctx)
    a, b = _defaults(), {"db": {"port": 1, "pool": {"min": 0}}, "cache": {"ttl": 0}}
    tz.merge_deep(a, b)
    tz.merge_deep(b, a)
    return [a == _defaults(), b]


def probe_argument_forms(ctx):
    tz = _tz(ctx)
    dicts = [{"a": {"b": 1}}, {"a": {"c": 2}}]
    return [tz.merge_deep(dicts), tz.merge_deep(iter(dicts)), tz.merge_deep(*dicts),
            ctx.message(TypeError, tz.merge_deep, {"a": 1}, factoryy=dict), "merge_deep" in tz.dicttoolz.__all__]


def probe_key_order(ctx):
    tz = _tz(ctx)
    merged = tz.merge_deep({"b": {"y": 1, "x": 2}, "a": 1}, {"c": 3, "b": {"z": 3, "y": 0}})
    return [list(merged), list(merged["b"])]


def probe_merge_and_merge_with(ctx):
    tz = _tz(ctx)
    inner = {"y": 1}
    return [tz.merge({"x": inner}, {"z": 1})["x"] is inner, tz.merge({1: 2, 3: 4}, {3: 3}),
            tz.merge_with(sum, {1: 1, 2: 2}, {1: 10}), tz.merge_with(tuple, [{1: 1}, {1: 2}]),
            _plain(tz.merge({1: 1}, factory=collections.OrderedDict))]


def probe_other_dicttoolz(ctx):
    tz = _tz(ctx)
    d = {"a": {"b": 1}}
    return [tz.assoc_in(d, ["a", "c"], 2), d, tz.update_in(d, ["a", "b"], lambda x: x + 1),
            tz.get_in(["a", "b"], d), tz.valmap(len, {"x": [1, 2]}), tz.keyfilter(lambda k: k > 1, {1: 1, 2: 2}),
            tz.dissoc({"a": 1, "b": 2}, "a"), tz.itemmap(reversed, {1: "one"})]


def probe_curried_namespace(ctx):
    tz = _tz(ctx)
    cur = ctx.load("toolz.curried")
    return [cur.merge(factory=dict)({1: 1}), cur.merge_with(sum)({1: 1}, {1: 2}), cur.get(0)("ab"),
            list(cur.take(2)([5, 6, 7])), cur.merge_deep.__doc__ == tz.merge_deep.__doc__,
            sorted(n for n in vars(ctx.load("toolz.curried.exceptions")) if n.startswith("merge"))]
