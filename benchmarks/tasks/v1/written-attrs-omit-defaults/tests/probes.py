"""Probes of written-attrs-omit-defaults: what the workspace's attrs answers (bench/verdict_runner.py).

Fail-to-pass: asdict's omit_defaults (the history's last commit) by the rules of docs/examples.md "Leaving out
defaults" and the changelog fragment: Factory defaults compared by a fresh value (with the instance when it takes
self), the stored value compared before the value serializer, every level asdict recurses into, attrs.asdict too.
Pass-to-pass: plain defaults at the top level (the commit did those), attributes without defaults, items of
collections and plain dicts, asdict and astuple without the option, as attrs 23.1.0 plus the commit answered them.
"""

import sys


def _attr(ctx):
    root = ctx.path("src")
    if root not in sys.path:
        sys.path.append(root)  # after the standard library: the workspace shadows nothing
    return ctx.load("attr")


def _attrs(ctx):
    _attr(ctx)
    return ctx.load("attrs")


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the answer is what was raised
        return {"raised": type(e).__name__}


def _classes(attr):
    @attr.s
    class Leaf:
        x = attr.ib(default=0)
        y = attr.ib(default=None)
        tags = attr.ib(default=attr.Factory(list))

    @attr.s
    class Tree:
        leaf = attr.ib(default=attr.Factory(Leaf))
        leaves = attr.ib(default=attr.Factory(list))
        by_name = attr.ib(default=attr.Factory(dict))

    return Leaf, Tree


def probe_top_level_plain_defaults(ctx):
    attr = _attr(ctx)

    @attr.s
    class A:
        a = attr.ib()
        b = attr.ib(default=1)
        c = attr.ib(default="x")

    return [attr.asdict(A(1), omit_defaults=True), attr.asdict(A(1, c="y"), omit_defaults=True),
            attr.asdict(A(None, 2, "x"), omit_defaults=True)]


def probe_factory_defaults(ctx):
    attr = _attr(ctx)
    Leaf, _ = _classes(attr)
    return [attr.asdict(Leaf(), omit_defaults=True), attr.asdict(Leaf(tags=["t"]), omit_defaults=True),
            attr.asdict(Leaf(1, 2, []), omit_defaults=True)]


def probe_factory_takes_self(ctx):
    attr = _attr(ctx)

    @attr.s
    class A:
        a = attr.ib(default=attr.Factory(list))
        b = attr.ib(default=attr.Factory(lambda self: self.a + [1], takes_self=True))

    return [attr.asdict(A(), omit_defaults=True), attr.asdict(A([2], [1]), omit_defaults=True),
            attr.asdict(A([2]), omit_defaults=True), attr.asdict(A([2], [2, 1]), omit_defaults=True)]


def probe_nested_instances(ctx):
    attr = _attr(ctx)
    Leaf, Tree = _classes(attr)
    return [attr.asdict(Tree(Leaf(1)), omit_defaults=True), attr.asdict(Tree(), omit_defaults=True),
            attr.asdict(Tree(Leaf(y=3, tags=["a"])), omit_defaults=True)]


def probe_nested_in_collections(ctx):
    attr = _attr(ctx)
    Leaf, Tree = _classes(attr)
    t = Tree(leaves=[Leaf(), Leaf(2), 0, None, [Leaf(y=1)]])
    return [attr.asdict(t, omit_defaults=True),
            attr.asdict(Tree(leaves=(Leaf(), Leaf(x=5))), omit_defaults=True, retain_collection_types=True)]


def probe_nested_in_dicts(ctx):
    attr = _attr(ctx)
    Leaf, Tree = _classes(attr)
    t = Tree(by_name={"a": Leaf(y=2), "b": 0, "c": None, "d": {"e": Leaf(x=4), "f": [Leaf(tags=[1])]}, 5: Leaf()})
    out = attr.asdict(t, omit_defaults=True)
    return sorted(([repr(k), v] for k, v in out["by_name"].items()), key=lambda kv: kv[0])


def probe_collection_items_kept(ctx):
    attr = _attr(ctx)
    _, Tree = _classes(attr)
    return [attr.asdict(Tree(leaves=[0, None, [], {}], by_name={"x": 0, "y": None}), omit_defaults=True),
            attr.asdict(Tree(leaves=[]), omit_defaults=True)]


def probe_recurse_false(ctx):
    attr = _attr(ctx)
    Leaf, Tree = _classes(attr)
    inner = Leaf(1)
    out = attr.asdict(Tree(inner, [Leaf()]), recurse=False, omit_defaults=True)
    return [sorted(out), out["leaf"] is inner, type(out["leaves"][0]).__name__,
            attr.asdict(Tree(), recurse=False, omit_defaults=True)]


def probe_before_value_serializer(ctx):
    attr = _attr(ctx)

    @attr.s
    class A:
        a = attr.ib(default=1)
        b = attr.ib(default=2)
        c = attr.ib(default="")

    seen = []

    def serialize(inst, field, value):
        seen.append(field.name if field is not None else None)
        return str(value) if field is not None and field.name != "c" else value

    out = attr.asdict(A(b=3, c=None), omit_defaults=True, value_serializer=serialize)
    blank = attr.asdict(A(), omit_defaults=True, value_serializer=lambda i, f, v: "" if v == 1 else v)
    return [out, seen, blank]


def probe_filter_first(ctx):
    attr = _attr(ctx)

    @attr.s
    class A:
        a = attr.ib(default=1)
        b = attr.ib(default=2)

    return [attr.asdict(A(b=3), omit_defaults=True, filter=lambda a, v: a.name == "a"),
            attr.asdict(A(a=5, b=3), omit_defaults=True, filter=attr.filters.exclude(attr.fields(A).a)),
            attr.asdict(A(a=5), omit_defaults=True, filter=lambda a, v: v != 5)]


def probe_next_gen_asdict(ctx):
    attrs = _attrs(ctx)

    @attrs.define
    class Inner:
        x: int = 0
        tags: list = attrs.Factory(list)

    @attrs.define
    class Outer:
        name: str
        inner: Inner = attrs.Factory(Inner)
        items: tuple = ()

    o = Outer("o", Inner(x=1), (Inner(), Inner(tags=["t"])))
    return [_call(attrs.asdict, o, omit_defaults=True), _call(attrs.asdict, Outer("o"), omit_defaults=True),
            _call(attrs.asdict, o)]


def probe_next_gen_signature(ctx):
    import inspect
    attrs = _attrs(ctx)
    params = inspect.signature(attrs.asdict).parameters
    return [sorted(params), params["omit_defaults"].default if "omit_defaults" in params else "absent",
            str(params["omit_defaults"].kind) if "omit_defaults" in params else "absent"]


def probe_docs_example(ctx):
    attrs = _attrs(ctx)

    @attrs.define
    class Settings:
        name: str
        retries: int = 3
        tags: list = attrs.Factory(list)

    return [_call(attrs.asdict, Settings("db", retries=5), omit_defaults=True),
            _call(attrs.asdict, Settings("db", tags=["x"]), omit_defaults=True)]


def probe_equality_not_identity(ctx):
    attr = _attr(ctx)

    @attr.s
    class A:
        a = attr.ib(default=1)
        b = attr.ib(default=float("nan"))
        c = attr.ib(default=(1, 2))
        d = attr.ib(default=attr.Factory(dict))

    out = attr.asdict(A(1.0, float("nan"), (1, 2), {}), omit_defaults=True, retain_collection_types=True)
    return [sorted(out), repr(out.get("b"))]  # NaN is never equal to itself: kept, answered as text


def probe_init_false_and_no_default(ctx):
    attr = _attr(ctx)

    @attr.s
    class A:
        a = attr.ib()
        b = attr.ib(init=False, default=7)
        c = attr.ib(init=False)

    x = A(None)
    x.c = None
    y = A(0)
    y.b, y.c = 8, 0
    return [attr.asdict(x, omit_defaults=True), attr.asdict(y, omit_defaults=True)]


def probe_dict_factory_order(ctx):
    import collections
    attr = _attr(ctx)
    Leaf, Tree = _classes(attr)
    out = attr.asdict(Tree(Leaf(1, 2)), omit_defaults=True, dict_factory=collections.OrderedDict)
    return [type(out).__name__, list(out), list(out["leaf"]), type(out["leaf"]).__name__]


def probe_without_the_option(ctx):
    attr = _attr(ctx)
    attrs = _attrs(ctx)
    Leaf, Tree = _classes(attr)
    t = Tree(Leaf(1), [Leaf()], {"a": Leaf(y=2)})
    return [attr.asdict(t), attr.asdict(t, omit_defaults=False), attrs.asdict(t), attr.astuple(t),
            _call(attrs.astuple, t, omit_defaults=True)]


def probe_other_api(ctx):
    attr = _attr(ctx)
    Leaf, _ = _classes(attr)
    return [[f.name for f in attr.fields(Leaf)], attr.has(Leaf), attr.asdict(attr.evolve(Leaf(), x=9)),
            attr.astuple(Leaf(1, 2, ["t"]))]
