"""Probes of written-sqlparse-redact-literals: what the workspace's sqlparse answers (bench/verdict_runner.py).

Fail-to-pass: the redact_literals formatting option the history's last two commits started, by the design notes
(docs/source/api.rst, "Redacting Literals"), the changelog and the examples the second commit wrote down: strings
with their prefix letters, numbers with their sign but not a subtraction's minus, identifiers, keywords, placeholders,
comments and LIMIT/OFFSET counts kept, all-literal IN lists collapsed, numbering per statement after existing $n,
redaction before the other options; the sqlformat flag. Pass-to-pass: validation of the option (already in the
history), formatting without it, parsing, splitting and the rest of the command line as sqlparse 0.4.4 answered them.
"""

import contextlib
import io


def _sp(ctx):
    return ctx.load("sqlparse")


def _fmt(ctx, sql, **options):
    sp = _sp(ctx)
    try:
        return sp.format(sql, **options)
    except sp.exceptions.SQLParseError:
        return "SQLParseError"


def _many(ctx, sqls, **options):
    return [_fmt(ctx, s, **options) for s in sqls]


def _cli(ctx, sql, *args):
    sp = _sp(ctx)
    cli = ctx.load("sqlparse.cli")
    path = ctx.tmp + "/query.sql"
    with open(path, "w", encoding="utf-8") as f:
        f.write(sql)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([path, *args])
        except SystemExit as e:
            code = "exit %s" % e.code
    del sp
    return [code, out.getvalue()]


def probe_examples_from_the_history(ctx):
    return [_fmt(ctx, "select * from t where name = 'O''Brien' and age > 42.5", redact_literals=True),
            _fmt(ctx, 'update "t" set "a" = NULL, b = 3 where c is not true', redact_literals="qmark"),
            _fmt(ctx, "select a from t where id in (1, 2, 3) and x in (4, y)", redact_literals=True),
            _fmt(ctx, "insert into t values (1, 'a');\nselect 'b' from t where c = 2", redact_literals="numbered"),
            _fmt(ctx, "select * from t where a = 5 limit 10 offset 20", redact_literals=True)]


def probe_strings(ctx):
    return _many(ctx, ["select '', 'it''s', '''quoted''' from t", "select 'a' || 'b' as c from t where d like '%x%'",
                       "insert into t (a, b) values ('x', 'y')"], redact_literals=True)


def probe_string_prefixes(ctx):
    return _many(ctx, ["select E'a\\n', n'x', X'1F', b'01' from t", "select e 'x', name'y' from t",
                       "select N'a', 'b' from t where c = E'd'"], redact_literals="numbered")


def probe_numbers(ctx):
    return _many(ctx, ["select 0x1F, 1.5e3, .5, 10, 2.0 from t", "select a1, t2.b3, 3d from t2"],
                 redact_literals=True)


def probe_signs_and_subtraction(ctx):
    return _many(ctx, ["select a from t where b = -5", "select x-5, x - 5, (a)-2, 3-1, 'c'-1 from t",
                       "select -1, f(-2) from t where c in (-3, 4)", "select $1-2, ?-3, \"q\"-4 from t"],
                 redact_literals="numbered")


def probe_kept_as_is(ctx):
    sqls = ['select "x", $1, ?, %s, :name, DEFAULT from t', "select a from t -- 'secret' 42\nwhere d is null",
            "select a from t /* 7 */ where b is true and c = false", "select count(*) from t"]
    return [_fmt(ctx, s, redact_literals=True) == s for s in sqls]


def probe_limit_and_offset(ctx):
    return _many(ctx, ["select 1 from t limit 5, 10", "select * from t where a = 1 limit 10 offset 20",
                       "select * from (select a from t limit 2) s where b = 3",
                       "select * from t offset 5 rows fetch first 3 rows only"], redact_literals=True)


def probe_in_lists(ctx):
    return _many(ctx, ["select * from t where a not in ('x', 'y') and b in (1, (2))",
                       "select * from t where c in (select 1) and d in (e) and f in (7)",
                       "select * from t where g in (1, /* two */ 2) and h IN (3,4,5,6,7,8)",
                       "select * from t where i in (E'a', N'b') and j in ()"], redact_literals="numbered")


def probe_numbering_per_statement(ctx):
    return _many(ctx, ["select $2, 'a', $1 from t where b = 3;\nselect 'c', $5",
                       "select 1;\nselect 2;\nselect 3", "select $10, 1 from t"], redact_literals="numbered")


def probe_qmark_and_true_agree(ctx):
    sql = "select 'a', 1 from t where b in (2, 3)"
    return [_fmt(ctx, sql, redact_literals=True), _fmt(ctx, sql, redact_literals="qmark")]


def probe_before_other_options(ctx):
    sql = "select a, 'long text' from t where b in (1, 2) -- c\n"
    return [_fmt(ctx, sql, redact_literals=True, keyword_case="upper", strip_comments=True, truncate_strings=2),
            _fmt(ctx, sql, redact_literals=True, reindent=True),
            _fmt(ctx, sql, redact_literals="numbered", identifier_case="upper", strip_whitespace=True),
            _fmt(ctx, "select a, 'x'+1 from t", redact_literals=True, use_space_around_operators=True)]


def probe_off_by_default(ctx):
    sql = "select 'a', 1 from t where b in (2, 3) limit 4"
    return [_fmt(ctx, sql), _fmt(ctx, sql, redact_literals=False), _fmt(ctx, sql, redact_literals=None)]


def probe_invalid_values(ctx):
    return [_fmt(ctx, "select 1", redact_literals=v) for v in ("yes", "$", 1, "NUMBERED", "?")]


def probe_cli_flag(ctx):
    sql = "select * from t where a = 'x' and b in (1, 2) limit 3\n"
    return [_cli(ctx, sql), _cli(ctx, sql, "--redact-literals"), _cli(ctx, sql, "--redact-literals=numbered"),
            _cli(ctx, sql, "--redact-literals=qmark", "-k", "upper"),
            _cli(ctx, sql, "-r", "--redact-literals=numbered")]


def probe_cli_bad_style(ctx):
    code, out = _cli(ctx, "select 1\n", "--redact-literals=dollar")
    return [code not in (0, "exit 0"), out]  # refused, however: argparse's exit 2 or the script's error status


def probe_cli_other_options(ctx):
    sql = "select a,b from t where c = 'x'\n"
    return [_cli(ctx, sql, "-k", "upper"), _cli(ctx, sql, "-r"), _cli(ctx, sql, "--strip-comments"),
            _cli(ctx, sql, "-k", "Spanish")[0]]


def probe_format_without_option(ctx):
    return _many(ctx, ["select a,b from t where c = 'x'", "select * from foo; -- comment\nselect 2"],
                 reindent=True, keyword_case="upper")


def probe_parse_and_split(ctx):
    sp = _sp(ctx)
    stmt = sp.parse("select a, 'b' from t where c in (1, 2)")[0]
    return [sp.split("select 1; select 'x;y'; select 3"), [str(t.ttype) for t in stmt.flatten()][:8],
            stmt.get_type()]


def probe_version(ctx):
    return _sp(ctx).__version__
