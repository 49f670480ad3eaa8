"""Probes of written-docstring-parser-export: what the workspace's docstring_parser answers (bench/verdict_runner.py).

Fail-to-pass: the export and the command-line tool the history's last two commits started, by the design notes
(docs/export.md) and the agreed examples (docstring_parser/tests/test_export.py): to_dict / Docstring.to_dict /
to_json with the same keys in the same order for every style, `kind` from the item's keyword, yields among the
returns, the first deprecation only, plain meta items under "other" with their args as a list, null for a missing
description or style, non-ASCII kept; `python -m docstring_parser` reading a file or standard input, printing JSON
(indent 2, one newline) or converting through compose(), refusing --rendering with JSON and unknown values (status 2),
parse errors on standard error with status 1, and main(argv) returning the status. Pass-to-pass: parsing, composing
and parse_from_object as docstring_parser 0.15 answered them.

The tool is run as `python -m docstring_parser` in a subprocess from the workspace (its own folder first on sys.path).
"""

import json
import os
import sys

GOOGLE = '''Fetch rows.

Read rows from a table,
lazily.

Args:
    table (str): where from
    limit (int, optional): how many. Defaults to 10.

Attributes:
    cache (dict): rows read so far

Yields:
    dict: one row

Raises:
    KeyError: no such table
    ValueError: bad limit
'''

REST = '''Short summary.

:param str name: who
:keyword int retries: how often
:attribute level: the level
:returns: the greeting
:rtype: str
:raises ValueError: empty name
:meta private: yes
'''

NUMPY = '''Compute things.

.. deprecated:: 2.1
    Use compute_more.

Parameters
----------
x : int, optional
    The x. Default is 3.
y
    The y.

Returns
-------
total : float
    The total.

Yields
------
int
    Partial sums.

Examples
--------
>>> compute(1)
2
'''

EPYDOC = '''Epydoc style.

@param a: the a
@type a: int
@return: nothing
@rtype: None
@raise OSError: on failure
'''


def _dp(ctx):
    """The workspace's docstring_parser, never an installed copy."""
    root = ctx.workspace
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("docstring_parser")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("docstring_parser came from %s, not the workspace" % mod.__file__)
    return mod


def _dict(ctx, text, style=None):
    dp = _dp(ctx)
    doc = dp.parse(text) if style is None else dp.parse(text, style=getattr(dp.DocstringStyle, style))
    return dp.to_dict(doc)


def _cli(ctx, args, stdin=None, file_text=None):
    """[exit status, stdout, stderr] of `python -m docstring_parser ARGS` run from the workspace."""
    _dp(ctx)
    argv = [sys.executable, "-m", "docstring_parser", *args]
    if file_text is not None:
        path = os.path.join(ctx.tmp, "docstring.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(file_text)
        argv.append(path)
    r = ctx.run(argv, cwd=ctx.workspace, input=stdin if stdin is not None else "", timeout=30,
                env={"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"})
    return [r["returncode"], r["stdout"], r["stderr"]]


def probe_agreed_google_example(ctx):
    return _dict(ctx, GOOGLE)


def probe_keys_in_order_every_style(ctx):
    dp = _dp(ctx)
    out = []
    for text in (GOOGLE, REST, NUMPY, EPYDOC, "Just a line."):
        doc = dp.parse(text)
        out.append([list(dp.to_dict(doc)), list(doc.to_dict()), dp.to_dict(doc) == doc.to_dict()])
    return out


def probe_rest_kinds_and_other(ctx):
    return _dict(ctx, REST)


def probe_numpydoc_returns_yields_deprecation_examples(ctx):
    return _dict(ctx, NUMPY)


def probe_epydoc(ctx):
    return _dict(ctx, EPYDOC, "EPYDOC")


def probe_styles_forced_and_detected(ctx):
    dp = _dp(ctx)
    out = []
    for text in ("One line.", ":param x: y", "Args:\n    x: y", "@param x: y"):
        row = []
        for style in (None, "REST", "GOOGLE", "NUMPYDOC", "EPYDOC"):
            try:
                row.append(_dict(ctx, text, style)["style"])
            except dp.ParseError:
                row.append("ParseError")
        out.append(row)
    return out


def probe_descriptions_null_when_absent(ctx):
    out = []
    for text in ("", ":param x: y", "Short only.", "Short.\n\nLong part.\n\n:returns: z"):
        d = _dict(ctx, text)
        out.append([d["short_description"], d["long_description"]])
    return out


def probe_hand_made_docstring(ctx):
    dp = _dp(ctx)
    common = ctx.load("docstring_parser.common")
    doc = dp.Docstring()
    doc.short_description = "Made by hand."
    doc.meta = [
        common.DocstringMeta(("note", "x"), "kept as a tuple"),
        common.DocstringDeprecated(["deprecated"], "first", "1.0"),
        common.DocstringParam(["key", "k"], None, "k", None, None, None),
        common.DocstringDeprecated(["deprecated"], "second", "2.0"),
        common.DocstringReturns(["yields"], "y", "int", True, "part"),
        common.DocstringReturns(["returns"], None, None, False),
        common.DocstringExample(["examples"], ">>> f()", "call it"),
        common.DocstringMeta([], None),
    ]
    return dp.to_dict(doc)


def probe_plain_data_only(ctx):
    dp = _dp(ctx)
    out = []
    for text in (GOOGLE, REST, NUMPY, EPYDOC):
        d = dp.to_dict(dp.parse(text))
        out.append(json.loads(json.dumps(d)) == d)
    return out


def probe_to_json(ctx):
    dp = _dp(ctx)
    doc = dp.parse("Grüße aus Köln.\n\n:param str straße: die Straße\n:returns: 你好")
    default = dp.to_json(doc)
    return [default, dp.to_json(doc, indent=None), dp.to_json(doc, indent=4) == json.dumps(
        json.loads(default), ensure_ascii=False, indent=4), json.loads(default) == dp.to_dict(doc)]


def probe_package_exports(ctx):
    dp = _dp(ctx)
    export = [callable(getattr(dp, "to_dict", None)), callable(getattr(dp, "to_json", None))]
    return export + [callable(getattr(dp.Docstring, "to_dict", None))]


def probe_cli_json_from_stdin(ctx):
    dp = _dp(ctx)
    code, out, err = _cli(ctx, [], stdin=GOOGLE)
    return [code, out, err, out == dp.to_json(dp.parse(GOOGLE), indent=2) + "\n"]


def probe_cli_file_and_dash(ctx):
    return [_cli(ctx, [], file_text=REST), _cli(ctx, ["-"], stdin=EPYDOC),
            _cli(ctx, ["--style", "rest"], file_text=":param x: ünïcode\n")]


def probe_cli_convert(ctx):
    return [_cli(ctx, ["--to", "google"], stdin=REST), _cli(ctx, ["--to", "numpydoc"], stdin=GOOGLE),
            _cli(ctx, ["--style", "google", "--to", "rest"], file_text=GOOGLE),
            _cli(ctx, ["--to", "epydoc"], stdin=":param int x: the x\n:returns: y\n")]


def probe_cli_convert_matches_compose(ctx):
    dp = _dp(ctx)
    out = []
    for text, to in ((REST, "GOOGLE"), (GOOGLE, "NUMPYDOC"), (NUMPY, "REST")):
        code, printed, _ = _cli(ctx, ["--to", to.lower()], stdin=text)
        composed = dp.compose(dp.parse(text), style=getattr(dp.DocstringStyle, to))
        out.append([code, printed == composed.rstrip("\n") + "\n"])
    return out


def probe_cli_rendering(ctx):
    return [_cli(ctx, ["--to", "google", "--rendering", r], stdin=REST) for r in ("compact", "clean", "expanded")]


def probe_cli_parse_error(ctx):
    dp = _dp(ctx)
    code, out, err = _cli(ctx, ["--style", "rest"], stdin=":param: nothing\n")
    try:
        dp.parse(":param: nothing\n", style=dp.DocstringStyle.REST)
        message = None
    except dp.ParseError as e:
        message = str(e)
    return [code, out, err.strip() == "error: %s" % message]


def probe_cli_usage_errors(ctx):
    cases = [["--style", "plain"], ["--to", "yaml"], ["--rendering", "clean"], ["--to", "json", "--rendering", "clean"],
             ["--rendering", "wide", "--to", "rest"], ["--frobnicate"]]
    return [[r[0], r[1]] for r in (_cli(ctx, c, stdin="Short.\n") for c in cases)]


def probe_main_returns_status(ctx):
    import contextlib
    import io
    _dp(ctx)
    main = ctx.load("docstring_parser.__main__").main
    out = []
    for argv, text in ((["--to", "rest"], "Args:\n    x: y\n"), (["--style", "rest"], ":param: nothing\n")):
        saved = sys.stdin
        sys.stdin = io.StringIO(text)
        o, e = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
                code = main(argv)
        finally:
            sys.stdin = saved
        out.append([code, o.getvalue(), e.getvalue().startswith("error: ")])
    return out


# Pass-to-pass: parsing, composing and parse_from_object as docstring_parser 0.15 answered them.

def _meta(doc):
    return [[type(m).__name__, list(m.args), m.description] for m in doc.meta]


def probe_parse_every_style(ctx):
    dp = _dp(ctx)
    out = []
    for text in (GOOGLE, REST, NUMPY, EPYDOC):
        doc = dp.parse(text)
        out.append([doc.style.name, doc.short_description, doc.long_description, _meta(doc),
                    [(p.arg_name, p.type_name, p.is_optional, p.default) for p in doc.params],
                    [(r.type_name, r.is_generator, r.return_name) for r in doc.many_returns]])
    return out


def probe_compose_every_style(ctx):
    dp = _dp(ctx)
    doc = dp.parse(REST)
    return [dp.compose(doc, style=s, rendering_style=r) for s in (dp.DocstringStyle.GOOGLE, dp.DocstringStyle.REST,
                                                                  dp.DocstringStyle.NUMPYDOC, dp.DocstringStyle.EPYDOC)
            for r in (dp.RenderingStyle.COMPACT, dp.RenderingStyle.EXPANDED)]


def probe_parse_errors_and_from_object(ctx):
    dp = _dp(ctx)
    doc = dp.parse_from_object(dp.compose)
    try:
        dp.parse(":param: nothing", style=dp.DocstringStyle.REST)
        err = None
    except dp.ParseError as e:
        err = type(e).__name__
    return [_meta(doc), err, [(p.arg_name, p.description) for p in doc.params]]
