"""Probes of real-pyflakes-annotation-checks: what the workspace's pyflakes reports (bench/verdict_runner.py).

Fail-to-pass (pyflakes 3.0.0, the two news entries the history commit announces; the release's own tests ported):
a function-local name that is only annotated (`x: int`) and never used is reported as UnusedAnnotation (message
'local variable %r is annotated but never used', at the annotation), next to UnusedVariable for assigned names;
using an annotation-only name marks it used; `x: int = x` reports x as undefined (the value is handled before the
target is bound); a name that is only annotated is undefined where it is read (as 2.5.0 already did at module
level). Pass-to-pass: the other checks around annotations and unused names as pyflakes 2.5.0 reported them.

Each answer is the list of [message class, line, message text] pyflakes reports for a snippet, sorted by line.
"""

import ast
import os
import sys
import textwrap


def _pf(ctx):
    """The workspace's pyflakes (imported from the repository root, never an installed copy)."""
    root = ctx.path(".")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("pyflakes")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("pyflakes came from %s, not the workspace" % mod.__file__)
    return ctx.load("pyflakes.checker")


def _flakes(ctx, code):
    checker = _pf(ctx)
    code = textwrap.dedent(code)
    w = checker.Checker(ast.parse(code), filename="snippet.py")
    out = [[type(m).__name__, m.lineno, m.message % m.message_args] for m in w.messages]
    return sorted(out, key=lambda x: (x[1], x[0], x[2]))


def probe_unused_annotation_in_function(ctx):
    return _flakes(ctx, """
    def f():
        name: str
        age: int
    """)


def probe_unused_annotation_next_to_unused_variable(ctx):
    return _flakes(ctx, """
    def f():
        x: int
        y = 1
        z: str = 'assigned'
    """)


def probe_annotation_used_later(ctx):
    return _flakes(ctx, """
    from typing import TYPE_CHECKING

    def f(items):
        total: int
        for total in items:
            pass
        return total

    def g():
        label: str
        if TYPE_CHECKING:
            print(label)
    """)


def probe_annotation_in_nested_scopes(ctx):
    return _flakes(ctx, """
    def outer():
        kept: int

        def inner():
            unused: float

        class Local:
            attr: int

        return inner, Local, kept
    """)


def probe_module_and_class_annotations_not_reported(ctx):
    return _flakes(ctx, """
    counter: int
    class Config:
        debug: bool
        name: str = 'x'
    """)


def probe_annotated_assignment_references_itself(ctx):
    return _flakes(ctx, """
    x: int = x
    """)


def probe_annotated_assignment_self_reference_in_function(ctx):
    return _flakes(ctx, """
    def f():
        total: int = total + 1
        return total
    """)


def probe_annotation_only_name_is_undefined(ctx):
    return _flakes(ctx, """
    name: str
    print(name)

    def f():
        other: int
        return other
    """)


def probe_unused_annotation_with_string_annotation(ctx):
    return _flakes(ctx, """
    from typing import List

    def f():
        items: 'List[int]'
        seen: "set"
    """)


def probe_unused_annotation_async_and_method(ctx):
    return _flakes(ctx, """
    class C:
        def method(self):
            cache: dict

    async def coro():
        result: bytes
    """)


def probe_unused_annotation_message_text(ctx):
    _pf(ctx)
    m = ctx.load("pyflakes.messages")
    msg = m.UnusedAnnotation("f.py", ast.parse("x: int").body[0], "x")
    return [str(msg), msg.message_args]


def probe_unused_variable_unchanged(ctx):
    return _flakes(ctx, """
    def f():
        a = 1
        b, c = 1, 2
        (d, e) = f()
        with open('x') as fh:
            pass
        try:
            pass
        except Exception as exc:
            pass
    """)


def probe_annotations_use_names(ctx):
    return _flakes(ctx, """
    from typing import Optional, Dict
    import collections

    def f(a: Optional[int]) -> 'Dict[str, int]':
        b: collections.OrderedDict = collections.OrderedDict()
        return b
    """)


def probe_undefined_names_in_annotations(ctx):
    return _flakes(ctx, """
    def f(a: Undefined1) -> Undefined2:
        b: Undefined3 = 1
        return b
    """)


def probe_future_annotations(ctx):
    return _flakes(ctx, """
    from __future__ import annotations

    def f(a: Later) -> Later:
        return a

    class Later:
        pass
    """)


def probe_typealias_and_unused_imports(ctx):
    return _flakes(ctx, """
    from typing_extensions import TypeAlias
    import os, sys

    Alias: TypeAlias = 'int'

    def g() -> Alias:
        return 1
    """)


def probe_other_checks(ctx):
    return _flakes(ctx, """
    import os
    def f():
        return undefined_thing
    d = {'a': 1, 'a': 2}
    assert (1, 'msg')
    if x is 'literal':
        pass
    print(f'no placeholders')
    """)
