"""Probes of real-parso-python313: what the workspace's parso answers (bench/verdict_runner.py).

Fail-to-pass (parso 0.8.4: "Add basic support for Python 3.13", which the history commit's changelog announces,
and the error messages its updated error tests expect from parso on the interpreter that runs them): a 3.13
grammar that loads, parses, round-trips and finds errors as the 3.12 grammar does; for grammars of 3.10 and later
the wordings CPython 3.10 brought in ("cannot assign to dict literal", "... to ellipsis", "... to expression",
deletions alike), and the non-ASCII bytes message without its full stop (asked of grammars of 3.10 and later only:
the release keys it on the running interpreter, the sandbox's 3.11, and the tests leave either key open).
Pass-to-pass: the older grammars' wordings ("dict display", "Ellipsis", "operator"), versions still refused, and
parsing, round trips, error recovery, the tree API and the utilities as parso 0.8.3 answered them.
"""

import os
import sys


def _parso(ctx):
    """The workspace's parso package, never an installed copy."""
    root = ctx.workspace
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("parso")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("parso came from %s, not the workspace" % mod.__file__)
    return mod


CODE = '''\
import os, sys as system
from typing import List


@decorator(1)
class Shape(Base, metaclass=Meta):
    """A shape."""
    sides: int = 4

    def area(self, *args, scale=1, **kwargs) -> float:
        if (n := len(args)) > 2:
            return sum(a * scale for a in args) / n
        elif not args:
            raise ValueError(f"no {self.sides!r:>3} sides")
        return [x for x in args if x][0]


async def fetch(url, /, retries=3):
    async with session() as s:
        async for chunk in s.get(url):
            yield await chunk
    try:
        pass
    except* (OSError, ValueError) as eg:
        del eg
    finally:
        lambda x=1: x ** -1


match command.split():
    case [action, *rest] if action != "go":
        print(action, *rest, sep="")
    case {"key": value, **others}:
        pass
    case Point(x=0, y=_) | None:
        pass
    case _:
        global total; total += 1
'''

BAD = {
    "dict_assign": "{} = 1",
    "dict_items_assign": "{a: b} = 1",
    "dict_del": "del {}",
    "dict_walrus": "({a: b} := {1: 2})",
    "ellipsis_assign": "... = 1",
    "ellipsis_del": "del ...",
    "or_assign": "1 | 1 = 3",
    "power_assign": "1**1 = 3",
    "invert_assign": "~ 1 = 3",
    "not_assign": "not 1 = 3",
    "and_assign": "1 and 1 = 3",
    "for_target": "for (not 1) in []: pass",
    "sum_del": "del x + y",
    "sum_walrus": "(a + b := 1)",
    "sum_augassign": "a + b += 1",
    "product_assign": "a * b = 1",
}

OTHER_BAD = ["return 1", "yield = 1", "def f():\n    nonlocal x\n", "x = 1 +", "f(**k, *a)", "None = 1",
             "lambda: (yield)", "class C:\n    break\n", "f(x for x in y, 1)", "a, *b, *c = d", "'abc' = 1",
             "def f(a, a): pass", "continue", "async def f():\n    yield from x\n", "print 'x'", "[x for x in y] = 1",
             "import a as b.c", "f() = 1", "True = 1", "x += 1 = 2"]


def _errors(parso, code, version):
    grammar = parso.load_grammar(version=version)
    module = grammar.parse(code)
    return [[e.message, e.code, e.start_pos] for e in grammar.iter_errors(module)]


def _dump(node):
    """A parse tree as nested [type, children] / [type, value, start_pos] lists."""
    if hasattr(node, "children"):
        return [node.type, [_dump(c) for c in node.children]]
    return [node.type, node.value, node.start_pos, node.prefix]


def _messages(parso, versions, keys):
    return [[v, [[m for m, _, _ in _errors(parso, BAD[k], v)] for k in keys]] for v in versions]


# --------------------------------------------------------------------------------------------- fail-to-pass


def probe_grammar_313_loads(ctx):
    parso = _parso(ctx)
    grammar = parso.load_grammar(version="3.13")
    again = parso.load_grammar(version="3.13")
    return [type(grammar).__name__, list(grammar.version_info), grammar is again,
            repr(grammar).startswith("<PythonGrammar")]


def probe_grammar_313_round_trip(ctx):
    parso = _parso(ctx)
    grammar = parso.load_grammar(version="3.13")
    samples = [CODE, "", "\n", "x = 1", "def f(\n", "if x:\n  pass\n else:\n", "  # comment only\n",
               "a = b'bytes' rb'raw' f'{x=}'\n", "type X = int\n"]
    return [[grammar.parse(s).get_code() == s, [c.type for c in grammar.parse(s).children]] for s in samples]


def probe_grammar_313_tree(ctx):
    parso = _parso(ctx)
    tree = parso.load_grammar(version="3.13").parse(CODE)
    return _dump(tree)


def probe_grammar_313_same_as_312(ctx):
    parso = _parso(ctx)
    g12, g13 = parso.load_grammar(version="3.12"), parso.load_grammar(version="3.13")
    out = []
    for code in [CODE, "x = (yield)\n", "print(*a, **k)\n", "async = 1\n", "f'{a!r}' 'b'\n", "@x\ndef f(): ...\n"]:
        out.append(_dump(g12.parse(code)) == _dump(g13.parse(code)))
    return out


def probe_parse_with_version_313(ctx):
    parso = _parso(ctx)
    module = parso.parse(CODE, version="3.13")
    return [module.get_code() == CODE, [f.name.value for f in module.iter_funcdefs()],
            [c.name.value for c in module.iter_classdefs()], sorted(module.get_used_names())[:12]]


def probe_errors_under_313(ctx):
    parso = _parso(ctx)
    return [[s, _errors(parso, s, "3.13")] for s in OTHER_BAD + [CODE]]


def probe_dict_literal_messages(ctx):
    parso = _parso(ctx)
    return _messages(parso, ["3.10", "3.11", "3.12"], ["dict_assign", "dict_items_assign", "dict_del", "dict_walrus"])


def probe_ellipsis_messages(ctx):
    parso = _parso(ctx)
    return _messages(parso, ["3.10", "3.11", "3.12"], ["ellipsis_assign", "ellipsis_del"])


def probe_expression_messages(ctx):
    parso = _parso(ctx)
    keys = ["or_assign", "power_assign", "invert_assign", "not_assign", "and_assign", "for_target", "sum_del",
            "sum_walrus", "sum_augassign", "product_assign"]
    return _messages(parso, ["3.10", "3.11", "3.12"], keys)


def probe_messages_under_313(ctx):
    parso = _parso(ctx)
    return _messages(parso, ["3.13"], sorted(BAD))


def probe_non_ascii_bytes_message(ctx):
    parso = _parso(ctx)
    return [[v, _errors(parso, 'b"\\xe4"\nx = b"\u00e4"\n', v)] for v in ["3.10", "3.11", "3.12"]]


# --------------------------------------------------------------------------------------------- pass-to-pass


def probe_messages_before_310(ctx):
    parso = _parso(ctx)
    return _messages(parso, ["3.6", "3.8", "3.9"], sorted(BAD))


def probe_versions_refused(ctx):
    parso = _parso(ctx)
    out = []
    for version in ["3.14", "3.5", "2.7", "4.0", "3", "3.x"]:
        try:
            parso.load_grammar(version=version)
            out.append([version, "loaded"])
        except Exception as e:  # noqa: BLE001 - which exception is the answer
            out.append([version, type(e).__name__, str(e)])
    return out


def probe_round_trip_older_grammars(ctx):
    parso = _parso(ctx)
    out = []
    for version in ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12"]:
        module = parso.parse(CODE, version=version)
        out.append([version, module.get_code() == CODE, [c.type for c in module.children]])
    return out


def probe_errors_under_311(ctx):
    parso = _parso(ctx)
    return [[s, _errors(parso, s, "3.11")] for s in OTHER_BAD]


def probe_error_recovery(ctx):
    parso = _parso(ctx)
    out = []
    for code in ["def f(:\n    pass\n", "x = [1, 2\ny = 3\n", "class C\n    a = 1\n", "if x\n", "f(a b)\n"]:
        module = parso.parse(code, version="3.11")
        out.append([module.get_code() == code, _dump(module)])
    try:
        parso.parse("x = (", version="3.11", error_recovery=False)
        out.append("parsed")
    except Exception as e:  # noqa: BLE001
        out.append(type(e).__name__)
    return out


def probe_tree_api(ctx):
    parso = _parso(ctx)
    module = parso.parse(CODE, version="3.11")
    cls = next(module.iter_classdefs())
    area = next(cls.iter_funcdefs())
    leaf = module.get_leaf_for_position((11, 12))
    return [cls.name.value, [n.value for n in cls.get_super_arglist().children if n.type == "name"]
            if cls.get_super_arglist() else None,
            cls.get_doc_node().value, area.name.value, [p.name.value for p in area.get_params()],
            [p.star_count for p in area.get_params()], area.is_generator(), [leaf.type, leaf.value, leaf.start_pos],
            [[[n.value for n in path] for path in i.get_paths()] for i in module.iter_imports()],
            module.end_pos, sorted((k, len(v)) for k, v in module.get_used_names().items())]


def probe_utils(ctx):
    parso = _parso(ctx)
    utils = ctx.load("parso.utils")
    return [utils.split_lines("a\nb\r\nc\x0cd\r"), utils.split_lines("a\nb\r\nc", keepends=True),
            utils.python_bytes_to_unicode(b"# coding: latin-1\nx = '\xe4'\n"),
            list(utils.parse_version_string("3.13")), list(utils.parse_version_string("3.9.1")),
            parso.split_lines("") == [""]]
