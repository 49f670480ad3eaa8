"""Probes of real-dacite-cache: what the workspace's dacite answers (bench/verdict_runner.py).

Fail-to-pass (dacite 1.8.0's cache, which the history commit's README section documents): `set_cache_size`,
`get_cache_size` and `clear_cache` exported by the package (2048 entries by default, None for an unbounded cache,
the size read back as set), from_dict working after each of them, the README's example as written.
Pass-to-pass: from_dict as dacite 1.7.0 answered it (nested data classes, defaults, collections, unions, Literal,
init=False fields, frozen classes, type hooks, cast, forward references, strict modes and every error
with its field path), and the README's promise that the cache is transparent: results depend on the class and the
Config, never on what was converted before (two classes of one name, one class under two forward-reference maps or
two sets of type hooks, a forward reference that fails, then resolves, then fails again).

Only cases where dacite 1.7.0 and 1.8.0 answer alike are asked outside the cache API (1.8.0 also changed how type
hooks meet Optional and collections, undocumented); default_factory values are compared by value, never identity
(1.8.0 caches them, fixed in a later release).
"""

import dataclasses
import enum
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Set, Tuple, Union


def _dacite(ctx):
    """The workspace's dacite package, never an installed copy."""
    root = ctx.workspace
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("dacite")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("dacite came from %s, not the workspace" % mod.__file__)
    return mod


def _plain(value):
    """A from_dict result as plain data: data classes as [class name, {field: value}], enums by name."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                                       if hasattr(value, f.name)}]
    if isinstance(value, enum.Enum):
        return "%s.%s" % (type(value).__name__, value.name)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return sorted(repr(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if value is None or type(value) in (bool, int, str, float):
        return value
    return ["%s" % type(value).__name__, repr(value)]


def _build(dacite, cls, data, config=None):
    """The converted instance as plain data, or [exception name, message, field path]."""
    try:
        return _plain(dacite.from_dict(data_class=cls, data=data, config=config))
    except Exception as e:  # noqa: BLE001 - which exception is the answer
        return [type(e).__name__, str(e), getattr(e, "field_path", None)]


def _resized(dacite, size, fn):
    """fn() with the cache sized `size`, the size before restored afterwards."""
    before = dacite.get_cache_size()
    try:
        dacite.set_cache_size(size)
        return fn()
    finally:
        dacite.set_cache_size(before)


@dataclass
class Point:
    x: int
    y: int = 0


@dataclass
class Shape:
    name: str
    points: List[Point]
    tags: Set[str] = field(default_factory=set)
    origin: Optional[Point] = None


@dataclass
class Box:
    size: Tuple[int, int]
    extra: Tuple[str, ...] = ()
    meta: Dict[str, int] = field(default_factory=dict)


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclass
class Paint:
    colour: Colour
    mode: Literal["matt", "gloss"] = "matt"


@dataclass
class Cat:
    meow: str


@dataclass
class Dog:
    bark: int


@dataclass
class Pet:
    animal: Union[Cat, Dog]
    weight: Union[int, str] = 0


@dataclass
class WithInit:
    a: int
    b: int = field(init=False, default=0)

    def __post_init__(self):
        self.b = self.a * 2


@dataclass(frozen=True)
class Frozen:
    key: str
    value: int = 3


@dataclass
class Left:
    a: int


@dataclass
class Right:
    a: str
    b: str = "r"


@dataclass
class Loose:
    anything: Any
    maybe: Optional[int] = None
    many: Optional[List[int]] = None


@dataclass
class Holder:
    inner: "Side"  # noqa: F821 - resolved only through Config(forward_references=...)
    label: str = "h"


# The runner compiles this file with postponed annotations (strings) and keeps it out of sys.modules: the classes
# above are given a module of their own there, so that their annotations resolve as a user's module's would.
_TYPES = types.ModuleType("dacite_probe_types")
_TYPES.__dict__.update({k: v for k, v in globals().items() if not k.startswith("__")})
sys.modules[_TYPES.__name__] = _TYPES
for _cls in (Point, Shape, Box, Colour, Paint, Cat, Dog, Pet, WithInit, Frozen, Left, Right, Loose, Holder):
    _cls.__module__ = _TYPES.__name__


# --------------------------------------------------------------------------------------------- fail-to-pass


def probe_cache_api_exported(ctx):
    dacite = _dacite(ctx)
    names = ["set_cache_size", "get_cache_size", "clear_cache"]
    return [[n, callable(getattr(dacite, n, None)), n in getattr(dacite, "__all__", [])] for n in names]


def probe_cache_size_default(ctx):
    dacite = _dacite(ctx)
    return dacite.get_cache_size()


def probe_cache_size_set_and_read(ctx):
    dacite = _dacite(ctx)
    out = []
    for size in (4096, 1, 2048, 10, 512):
        out.append(_resized(dacite, size, dacite.get_cache_size))
    out.append(dacite.get_cache_size())
    return out


def probe_cache_size_unbounded(ctx):
    dacite = _dacite(ctx)
    return [_resized(dacite, None, dacite.get_cache_size),
            _resized(dacite, None, lambda: _build(dacite, Shape, {"name": "s", "points": [{"x": 1}]})),
            dacite.get_cache_size()]


def probe_clear_cache(ctx):
    dacite = _dacite(ctx)
    first = _build(dacite, Shape, {"name": "a", "points": [{"x": 1, "y": 2}], "tags": {"t"}})
    cleared = dacite.clear_cache()
    again = _build(dacite, Shape, {"name": "a", "points": [{"x": 1, "y": 2}], "tags": {"t"}})
    twice = [dacite.clear_cache(), dacite.clear_cache()]
    return [first, cleared, again, twice, first == again, dacite.get_cache_size()]


def probe_from_dict_under_each_size(ctx):
    dacite = _dacite(ctx)
    out = []
    for size in (1, 4096, None, 2):
        def convert():
            dacite.clear_cache()
            return [_build(dacite, Box, {"size": (1, 2), "extra": ("a", "b"), "meta": {"k": 1}}),
                    _build(dacite, Pet, {"animal": {"bark": 2}, "weight": "heavy"}),
                    _build(dacite, Point, {"x": "no"})]
        out.append(_resized(dacite, size, convert))
    return out


def probe_readme_example(ctx):
    dacite = _dacite(ctx)
    ns = {}
    before = dacite.get_cache_size()
    try:
        exec("from dacite import set_cache_size, get_cache_size, clear_cache\n"  # noqa: S102 - the README's lines
             "out = [get_cache_size()]\n"
             "out.append(set_cache_size(4096))\n"
             "out.append(get_cache_size())\n"
             "out.append(set_cache_size(None))\n"
             "out.append(get_cache_size())\n"
             "out.append(clear_cache())\n", ns)
    finally:
        dacite.set_cache_size(before)
    return ns["out"]


# --------------------------------------------------------------------------------------------- transparency


def probe_transparent_same_name_classes(ctx):
    dacite = _dacite(ctx)

    def make(kind, default):
        return dataclasses.make_dataclass("Item", [("value", kind), ("note", str, field(default=default))])

    first, second = make(int, "one"), make(str, "two")
    return [_build(dacite, first, {"value": 1}), _build(dacite, second, {"value": "1"}),
            _build(dacite, first, {"value": "1"}), _build(dacite, second, {"value": 1}),
            _build(dacite, first, {"value": 5, "note": "n"})]


def probe_transparent_forward_references(ctx):
    dacite = _dacite(ctx)
    to_left = dacite.Config(forward_references={"Side": Left})
    to_right = dacite.Config(forward_references={"Side": Right})
    return [_build(dacite, Holder, {"inner": {"a": 1}}, to_left),
            _build(dacite, Holder, {"inner": {"a": "x"}}, to_right),
            _build(dacite, Holder, {"inner": {"a": 2}, "label": "again"}, to_left),
            _build(dacite, Holder, {"inner": {"a": 3}}, to_right),
            _build(dacite, Holder, {"inner": {"a": "y", "b": "z"}}, dacite.Config(forward_references={"Side": Right}))]


def probe_transparent_forward_reference_failure(ctx):
    dacite = _dacite(ctx)
    data = {"inner": {"a": 1}}
    good = dacite.Config(forward_references={"Side": Left})
    out = [_build(dacite, Holder, data)[0], _build(dacite, Holder, data, good),
           _build(dacite, Holder, data)[0], _build(dacite, Holder, data, dacite.Config(forward_references={}))[0],
           _build(dacite, Holder, data, good)]
    dacite.clear_cache()
    out.append(_build(dacite, Holder, data)[0])
    return out


def probe_transparent_type_hooks(ctx):
    dacite = _dacite(ctx)
    upper = dacite.Config(type_hooks={str: str.upper})
    double = dacite.Config(type_hooks={int: lambda v: v * 2})
    data = {"name": "sq", "points": [{"x": 1, "y": 2}]}
    return [_build(dacite, Shape, data), _build(dacite, Shape, data, upper), _build(dacite, Shape, data, double),
            _build(dacite, Shape, data), _build(dacite, Shape, data, dacite.Config(type_hooks={str: str.title}))]


def probe_transparent_config_flags(ctx):
    dacite = _dacite(ctx)
    data = {"x": 1, "z": 3}
    return [_build(dacite, Point, data), _build(dacite, Point, data, dacite.Config(strict=True)),
            _build(dacite, Point, data), _build(dacite, Point, {"x": "1"}, dacite.Config(check_types=False)),
            _build(dacite, Point, {"x": "1"}), _build(dacite, Point, {"x": "1"}, dacite.Config(check_types=False))]


# --------------------------------------------------------------------------------------------- pass-to-pass


def probe_nested_and_defaults(ctx):
    dacite = _dacite(ctx)
    return [_build(dacite, Shape, {"name": "tri", "points": [{"x": 0}, {"x": 1, "y": 1}, {"x": 2}]}),
            _build(dacite, Shape, {"name": "p", "points": [], "origin": {"x": 5, "y": 6}, "tags": {"a", "b"}}),
            _build(dacite, Shape, {"name": "n", "points": [], "origin": None})]


def probe_default_factory_values(ctx):
    dacite = _dacite(ctx)
    a = dacite.from_dict(Box, {"size": (1, 1)})
    b = dacite.from_dict(Box, {"size": (2, 2)})
    return [_plain(a), _plain(b), a.meta == b.meta == {}]


def probe_collections(ctx):
    dacite = _dacite(ctx)
    return [_build(dacite, Box, {"size": (3, 4), "extra": ("x",), "meta": {"a": 1, "b": 2}}),
            _build(dacite, Box, {"size": (3, "4")}), _build(dacite, Box, {"size": (3, 4), "meta": {"a": "1"}}),
            _build(dacite, Shape, {"name": "s", "points": [{"x": 1}, {"x": "bad"}]}),
            _build(dacite, Shape, {"name": "s", "points": [{"y": 1}]})]


def probe_unions(ctx):
    dacite = _dacite(ctx)
    strict = dacite.Config(strict_unions_match=True)
    return [_build(dacite, Pet, {"animal": {"meow": "m"}}), _build(dacite, Pet, {"animal": {"bark": 3}, "weight": "x"}),
            _build(dacite, Pet, {"animal": {"purr": 1}}), _build(dacite, Pet, {"animal": {"meow": "m"}, "weight": 1.5}),
            _build(dacite, Pet, {"animal": {"meow": "m"}}, strict)]


def probe_enum_cast_and_literal(ctx):
    dacite = _dacite(ctx)
    cast = dacite.Config(cast=[Colour])
    return [_build(dacite, Paint, {"colour": "red"}, cast),
            _build(dacite, Paint, {"colour": "green", "mode": "gloss"}, cast),
            _build(dacite, Paint, {"colour": "red", "mode": "satin"}, cast), _build(dacite, Paint, {"colour": "red"}),
            _build(dacite, Paint, {"colour": "blue"}, cast)[0]]


def probe_init_false_and_frozen(ctx):
    dacite = _dacite(ctx)
    return [_build(dacite, WithInit, {"a": 2}), _build(dacite, WithInit, {"a": 3, "b": 7}),
            _build(dacite, WithInit, {"b": 1}),
            _build(dacite, Frozen, {"key": "k"}), _build(dacite, Frozen, {"key": "k", "value": 9}),
            _build(dacite, Frozen, {"value": 9})]


def probe_errors_and_paths(ctx):
    dacite = _dacite(ctx)
    out = [_build(dacite, Shape, {"name": 1, "points": []}), _build(dacite, Shape, {"points": []}),
           _build(dacite, Shape, {"name": "o", "points": [], "origin": {"x": None}}),
           _build(dacite, Point, {"x": 1, "extra": 2, "more": 3}, dacite.Config(strict=True))[0]]
    exc = [issubclass(getattr(dacite, n), dacite.DaciteError) for n in
           ("WrongTypeError", "MissingValueError", "UnionMatchError", "StrictUnionMatchError", "ForwardReferenceError",
            "UnexpectedDataError")]
    return [out, exc]


def probe_any_and_optional(ctx):
    dacite = _dacite(ctx)

    return [_build(dacite, Loose, {"anything": {"a": [1]}}),
            _build(dacite, Loose, {"anything": None, "maybe": 4}),
            _build(dacite, Loose, {"anything": 1, "many": [1, 2]}),
            _build(dacite, Loose, {"anything": 1, "maybe": "4"}),
            _build(dacite, Loose, {"anything": 1, "many": [1, "2"]})]
