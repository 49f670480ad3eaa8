"""Config schemas: a frozen dataclass is the only declaration of a setting; ConfigDicts are derived from it.

    to_config_dict(obj)                      dataclass instance → ml_collections.ConfigDict (its values as defaults)
    from_config_dict(cls, section, name)     ConfigDict / dict → frozen `cls`, unknown keys rejected by name
    field_help(cls)                          {field: the comment on its line}
    describe(obj)                            every key, its value and its help, one per line
    check_overrides(config, argv)            `--config.a.b=v` flags that name no key, as a ConfigError

A field's help is the comment on its line in the class body (`lr: float = 3e-4  # peak learning rate`), or the
comment lines right above it; `tests/test_config_schema.py` requires one on every field of every schema. Experiment
files edit the derived ConfigDict (`c.optim.lr = 1e-3`, `--config.optim.lr=1e-3` on the command line) and the
run converts each section back exactly once, at its factory boundary; modules and losses only see the frozen
dataclasses. Validation of values lives in each dataclass's `__post_init__`, so a ConfigDict edit, a command-line
flag and a dataclass built in code are all checked by the same lines.

Type mapping (dataclass → ConfigDict → dataclass): nested dataclasses ↔ nested ConfigDicts; tuples ↔ lists (of
dicts, for tuples of dataclasses); `Optional[int | float | str | bool]` None ↔ a typed `FieldReference(None)` (so a
flag can set it); dict ↔ ConfigDict; ints are accepted where a float is declared. Nothing here imports
ml_collections at module level: the model, kernels and sharding import without it (the GPU image lacks it).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import io
import textwrap
import tokenize
import types
import typing
from typing import Any, Mapping, Sequence

_SCALARS = (int, float, str, bool)


class ConfigError(ValueError):
    """A config value or key that the schema does not accept; the message names the key and what was expected."""


# ----------------------------------------------------------------------------------------------- reflection


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
    """The resolved type annotations of a dataclass's fields."""
    return typing.get_type_hints(cls)


def _optional_arg(tp) -> Any:
    """X for Optional[X] / X | None, else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def _tuple_item(tp) -> Any:
    """The element type of tuple[X, ...] (or Any for a bare tuple); None when tp is not a homogeneous tuple."""
    if tp is tuple:
        return Any
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        return args[0] if len(args) == 2 and args[1] is Ellipsis else Any
    return None


@functools.lru_cache(maxsize=None)
def field_help(cls) -> dict[str, str]:
    """{field name: help} from the comments on (or right above) each field's line, base classes first."""
    out: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if dataclasses.is_dataclass(k)]):
        out.update(_class_comments(klass))
    return out


def _class_comments(klass) -> dict[str, str]:
    """The field comments of one class body (not its bases)."""
    try:
        lines = textwrap.dedent(inspect.getsource(klass)).splitlines()
    except (OSError, TypeError):
        return {}
    body = ast.parse("\n".join(lines)).body[0].body
    out = {}
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = _trailing_comment(lines[node.lineno - 1:node.end_lineno]) or _leading_comment(lines, node.lineno - 1)
            if text:
                out[node.target.id] = text
    return out


def _trailing_comment(stmt_lines: list[str]) -> str:
    """The first comment token inside a statement's lines (tokenized, so a '#' in a string is not one)."""
    readline = io.StringIO("\n".join(line.strip() for line in stmt_lines) + "\n").readline
    try:
        return next((t.string.lstrip("#").strip() for t in tokenize.generate_tokens(readline)
                     if t.type == tokenize.COMMENT), "")
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return ""


def _leading_comment(lines: list[str], index: int) -> str:
    """The run of whole-line comments directly above line `index`, joined."""
    block = []
    while index > 0 and lines[index - 1].strip().startswith("#"):
        index -= 1
        block.insert(0, lines[index].strip().lstrip("#").strip())
    return " ".join(block)


# ----------------------------------------------------------------------------------------------- dataclass → dict


def to_config_dict(obj):
    """The ml_collections ConfigDict of a dataclass instance (values as defaults, typed None references)."""
    import ml_collections  # optional at import time (see the module docstring)

    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"to_config_dict expects a dataclass instance, got {obj!r}")
    hints = _hints(type(obj))
    c = ml_collections.ConfigDict()
    for f in dataclasses.fields(obj):
        value, tp = getattr(obj, f.name), hints[f.name]
        inner = _optional_arg(tp)
        if value is None and inner in _SCALARS:
            c[f.name] = ml_collections.FieldReference(None, field_type=inner)
        elif dataclasses.is_dataclass(value):
            c[f.name] = to_config_dict(value)
        elif isinstance(value, Mapping):
            c[f.name] = ml_collections.ConfigDict(_plain(value))
        else:
            c[f.name] = _plain(value)
    return c


def _plain(value):
    """Tuples → lists, dataclasses → dicts, recursively (the JSON-like form of a value)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def to_dict(obj) -> dict:
    """The plain (JSON-ready) dict of a dataclass instance; `from_config_dict` inverts it."""
    return _plain(obj)


# ----------------------------------------------------------------------------------------------- dict → dataclass


def from_config_dict(cls, section, name: str = ""):
    """A frozen `cls` from a ConfigDict / dict section named `name`; unknown keys and wrong types are ConfigErrors.

    A `cls` instance passes through unchanged. Missing keys take the dataclass defaults.
    """
    if isinstance(section, cls):
        return section
    d = section.to_dict() if hasattr(section, "to_dict") else section
    if not isinstance(d, Mapping):
        raise ConfigError(f"config section {name or cls.__name__!r} = {section!r}; expected a mapping of "
                          f"{cls.__name__} fields")
    hints, fields = _hints(cls), {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in d if k not in fields]
    if unknown:
        raise ConfigError(unknown_key_message(unknown[0], name, sorted(fields)))
    kwargs = {k: _convert(v, hints[k], _join(name, k)) for k, v in d.items()}
    missing = [k for k, f in fields.items() if k not in kwargs and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"config section {name or cls.__name__!r} lacks {missing}; expected every field of "
                          f"{cls.__name__} without a default")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:
        msg = str(e)
        raise ConfigError(msg if not name or msg.startswith(name) else f"{name}: {msg}") from e


def _join(section: str, key: str) -> str:
    return f"{section}.{key}" if section else key


def unknown_key_message(key: str, section: str, known: Sequence[str]) -> str:
    """'unknown key …' naming the key, its section, the closest known keys and all of them."""
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    where = f"section {section!r}" if section else "the top level"
    return f"unknown config key {_join(section, key)!r}: {where} has no {key!r}{hint} (known keys: {', '.join(known)})"


def _convert(value, tp, key: str):
    """`value` as declared type `tp`, or a ConfigError naming the key."""
    if tp is Any or tp is object:
        return value
    inner = _optional_arg(tp)
    if inner is not None:
        return None if value is None else _convert(value, inner, key)
    if dataclasses.is_dataclass(tp):
        return from_config_dict(tp, value, key)
    item = _tuple_item(tp)
    if item is not None:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key {key!r} = {value!r}; expected a list")
        return tuple(_convert(v, item, f"{key}[{i}]") for i, v in enumerate(value))
    origin = typing.get_origin(tp) or tp
    if origin in (dict, Mapping) or origin is typing.Mapping:
        if not isinstance(value, Mapping) and not hasattr(value, "to_dict"):
            raise ConfigError(f"config key {key!r} = {value!r}; expected a mapping")
        return dict(value.to_dict() if hasattr(value, "to_dict") else value)
    if origin in (typing.Union, types.UnionType):
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in _SCALARS and (not isinstance(value, tp) or (tp is int and isinstance(value, bool))):
        raise ConfigError(f"config key {key!r} = {value!r} ({type(value).__name__}); expected {tp.__name__}")
    return value


# ----------------------------------------------------------------------------------------------- help


def describe(obj, prefix: str = "") -> list[str]:
    """`key = value  # help` for every field of a dataclass instance, nested sections flattened with dots."""
    helps, out = field_help(type(obj)), []
    for f in dataclasses.fields(obj):
        value, key = getattr(obj, f.name), _join(prefix, f.name)
        if dataclasses.is_dataclass(value):
            out.append(f"{key}:" + (f"  # {helps[f.name]}" if f.name in helps else ""))
            out += describe(value, key)
        else:
            out.append(f"{key} = {_plain(value)!r}" + (f"  # {helps[f.name]}" if f.name in helps else ""))
    return out


def check_overrides(config, argv: Sequence[str], flag: str = "config") -> None:
    """ConfigError for the first `--{flag}.a.b=v` in argv whose path names no key of `config` (a ConfigDict)."""
    for arg in argv:
        if not arg.startswith(f"--{flag}."):
            continue
        path = arg[len(flag) + 3:].split("=", 1)[0].split(".")
        node, walked = config, []
        for part in path:
            keys = list(node.keys()) if hasattr(node, "keys") else []
            if part not in keys:
                if not keys:
                    raise ConfigError(f"--{flag}.{'.'.join(path)}: {'.'.join(walked)!r} is a value, not a section")
                raise ConfigError(unknown_key_message(part, ".".join(walked), sorted(keys)))
            node, walked = node[part], walked + [part]
