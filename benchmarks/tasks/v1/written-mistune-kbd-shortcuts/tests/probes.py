"""Probes of written-mistune-kbd-shortcuts: what the workspace's mistune answers (bench/verdict_runner.py).

Fail-to-pass: the kbd plugin of the history's last commit, by the rules of docs/plugins.rst ("kbd"): key names
trimmed, the plus key written last, key names always escaped and never parsed as markup, brackets without a key left
as text, the markdown renderer writing the normal form and the RST renderer the :kbd: role (they failed). Pass-to-
pass: the plugin's plain shortcuts in HTML, code spans and blocks, tables (never broken), the other renderers and
plugins, as mistune 3.0.2 plus the commit answered them.
"""

import sys


def _mi(ctx):
    root = ctx.path("src")
    if root not in sys.path:
        sys.path.append(root)  # after the standard library: the workspace shadows nothing
    return ctx.load("mistune")


def _render(fn, text):
    try:
        return fn(text)
    except Exception as e:  # noqa: BLE001 - the answer is what was raised
        return {"raised": type(e).__name__}


def _html(ctx, text, escape=False, plugins=("kbd",)):
    mi = _mi(ctx)
    return _render(mi.create_markdown(escape=escape, plugins=list(plugins)), text)


def _markdown(ctx, text, plugins=("kbd",)):
    mi = _mi(ctx)
    renderer = ctx.load("mistune.renderers.markdown").MarkdownRenderer()
    return _render(mi.create_markdown(renderer=renderer, plugins=list(plugins)), text)


def _rst(ctx, text, plugins=("kbd",)):
    mi = _mi(ctx)
    renderer = ctx.load("mistune.renderers.rst").RSTRenderer()
    return _render(mi.create_markdown(renderer=renderer, plugins=list(plugins)), text)


def probe_html_shortcuts(ctx):
    return [_html(ctx, "Press [[Ctrl+Shift+P]] to open the palette."), _html(ctx, "Save with [[S]], quit with [[Esc]]."),
            _html(ctx, "Press [[Ctrl+Shift+P]].", escape=True)]


def probe_spaces_trimmed(ctx):
    return [_html(ctx, "[[ Ctrl + C ]] copies"), _html(ctx, "[[Alt +Tab]] and [[ F5]]"),
            _html(ctx, "[[ Ctrl + C ]]", plugins=("kbd", "speedup"))]


def probe_plus_key(ctx):
    return [_html(ctx, "[[Ctrl++]] zooms in"), _html(ctx, "[[+]] alone"), _html(ctx, "[[ Ctrl + + ]]")]


def probe_escaped_always(ctx):
    return [_html(ctx, "[[<]] and [[Alt+&]]"), _html(ctx, "[[<b>]]", escape=True),
            _html(ctx, "[[<]]", plugins=("kbd", "speedup"))]


def probe_not_parsed_inside(ctx):
    return [_html(ctx, "[[*a*]] and [[`x`]]"), _html(ctx, "[[_Shift_+A]]")]


def probe_no_key_stays_text(ctx):
    return [_html(ctx, "[[ ]] and [[]] here"), _html(ctx, "[[  +  ]]"), _html(ctx, "a [[Ctrl+\nC]] b")]


def probe_code_untouched(ctx):
    return [_html(ctx, "Not a key: `[[Ctrl+C]]`"), _html(ctx, "    [[Ctrl+C]]\n"), _html(ctx, "```\n[[A]]\n```\n")]


def probe_inside_inline_markup(ctx):
    return [_html(ctx, "*Press [[Ctrl+S]] often* and **[[F5]]**"), _html(ctx, "[see [[F1]]](/help)")]


def probe_markdown_renderer(ctx):
    return [_markdown(ctx, "Press [[ Ctrl + Shift+p ]] or [[Ctrl++]].\n"), _markdown(ctx, "# Keys\n\n- [[A]]\n- [[B+C]]\n")]


def probe_rst_renderer(ctx):
    return [_rst(ctx, "# Keys\n\nPress [[Ctrl+Shift+P]], then [[Esc]].\n"), _rst(ctx, "*[[ Alt + F4 ]]* quits\n")]


def probe_rst_with_tables(ctx):
    text = "| a | b |\n|---|---|\n| 1 | 2 |\n\nPress [[Enter]].\n"
    return [_html(ctx, text, plugins=("table", "kbd")), _rst(ctx, "Press [[Enter]].\n", plugins=("table", "kbd"))]


def probe_ast(ctx):
    mi = _mi(ctx)
    md = mi.create_markdown(renderer="ast", plugins=["kbd"])
    return [md("[[ Ctrl + + ]]")[0]["children"], md("[[A]]")[0]["children"]]


def probe_without_plugin(ctx):
    mi = _mi(ctx)
    return [mi.html("Press [[Ctrl+C]] now"), _markdown(ctx, "Press [[Ctrl+C]] now\n", plugins=()),
            _rst(ctx, "Press [[Ctrl+C]] now\n", plugins=())]


def probe_other_plugins(ctx):
    return [_html(ctx, "~~del~~ ==mark== [[K]]", plugins=("strikethrough", "mark", "kbd")),
            _html(ctx, "[^1] [[K]]\n\n[^1]: note", plugins=("footnotes", "kbd")),
            _html(ctx, "see https://example.com [[K]]", plugins=("url", "kbd"))]


def probe_renderers_without_plugins(ctx):
    text = "# Title\n\nSome *text* with `code` and a [link](http://x).\n\n> quote\n\n1. one\n2. two\n"
    return [_markdown(ctx, text, plugins=()), _rst(ctx, text, plugins=()), _html(ctx, text, escape=True, plugins=())]


def probe_version(ctx):
    return _mi(ctx).__version__
