"""Probes of real-sqlparse-lexer: what the workspace's sqlparse answers (bench/verdict_runner.py).

Fail-to-pass (sqlparse 0.4.4): quoted strings lex in linear time (an unterminated one full of backslashes no longer
backtracks for ever: the ReDoS advisory GHSA-rrm6-wvj7-cwh2); IN is a keyword again, not grouped as a comparison;
the lexer is a configurable singleton (Lexer.get_default_instance, clear, set_SQL_REGEX, add_keywords,
default_initialization; keywords.SQL_REGEX a list of (regex, token type) as docs/source/extending.rst shows it).
Pass-to-pass: splitting, formatting, grouping of identifiers and comparisons, strings and comments, as 0.4.3 did.
"""

SLOW = "import sys, sqlparse\ns = sys.argv[1]\nprint(len(list(sqlparse.lexer.tokenize(s))))\n"


def _sp(ctx):
    return ctx.load("sqlparse")


def _flat(sql, sp):
    return [[str(t.ttype), t.value] for t in sp.parse(sql)[0].flatten() if not t.is_whitespace]


def _tree(token):
    """A token tree as nested [class name, value or children]."""
    if token.is_group:
        return [type(token).__name__, [_tree(t) for t in token.tokens if not t.is_whitespace]]
    return [str(token.ttype), token.value]


def _lex_in_child(ctx, text):
    import sys
    r = ctx.run([sys.executable, "-c", SLOW, text], timeout=10)
    return r["returncode"] == 0 and r["stdout"].strip().isdigit()  # lexed to the end within the time limit


def _restore(sp):
    sp.lexer.Lexer.get_default_instance().default_initialization()


def probe_unterminated_string_is_fast(ctx):
    return [_lex_in_child(ctx, "select '" + "\\\\" * 30 + "x"), _lex_in_child(ctx, "select '" + "\\'" * 30)]


def probe_unterminated_symbol_is_fast(ctx):
    return _lex_in_child(ctx, 'select "' + "\\\\" * 30 + "x")


def probe_strings_still_lex(ctx):
    sp = _sp(ctx)
    return [_flat(s, sp) for s in ["select 'it''s'", "select 'a\\'b'", "select 'back\\\\slash'",
                                   'select "quoted ident" from "t"', "select '' , 'x'"]]


def probe_in_is_a_keyword(ctx):
    sp = _sp(ctx)
    return [_flat("a in b", sp), _flat("x not in (1, 2)", sp)]


def probe_where_in_not_grouped_as_comparison(ctx):
    sp = _sp(ctx)
    stmt = sp.parse("select * from t where x in (1, 2) and y = 3")[0]
    return _tree(stmt.tokens[-1])


def probe_comparisons_still_grouped(ctx):
    sp = _sp(ctx)
    out = []
    for sql in ["select * from t where a = 1", "select * from t where a like 'x%'",
                "select * from t where a regexp 'x'", "select * from t where a div 2 > 1"]:
        out.append(_tree(sp.parse(sql)[0].tokens[-1]))
    return out


def probe_default_lexer_is_shared(ctx):
    sp = _sp(ctx)
    lexer = sp.lexer.Lexer
    a, b = lexer.get_default_instance(), lexer.get_default_instance()
    return [a is b, type(a).__name__, isinstance(sp.keywords.SQL_REGEX, list),
            all(len(x) == 2 and isinstance(x[0], str) for x in sp.keywords.SQL_REGEX)]


def probe_add_keywords(ctx):
    sp = _sp(ctx)
    lex = sp.lexer.Lexer.get_default_instance()
    before = _flat("select bacon from eggs", sp)
    try:
        lex.add_keywords({"BACON": sp.tokens.Name.Builtin, "EGGS": sp.tokens.Keyword})
        added = _flat("select bacon from eggs", sp)
    finally:
        _restore(sp)
    return [before, added, _flat("select bacon from eggs", sp)]


def probe_custom_regex_first(ctx):
    sp = _sp(ctx)
    kw = sp.keywords
    lex = sp.lexer.Lexer.get_default_instance()
    try:
        lex.clear()
        lex.set_SQL_REGEX([(r"ZORDER\s+BY\b", sp.tokens.Keyword)] + kw.SQL_REGEX)
        for d in (kw.KEYWORDS_COMMON, kw.KEYWORDS_ORACLE, kw.KEYWORDS_PLPGSQL, kw.KEYWORDS_HQL, kw.KEYWORDS_MSACCESS,
                  kw.KEYWORDS):
            lex.add_keywords(d)
        custom = _flat("select * from foo zorder by bar;", sp)
    finally:
        _restore(sp)
    return [custom, _flat("select * from foo zorder by bar;", sp)]


def probe_reduced_keyword_set(ctx):
    sp = _sp(ctx)
    kw = sp.keywords
    lex = sp.lexer.Lexer.get_default_instance()
    try:
        lex.clear()
        lex.set_SQL_REGEX(kw.SQL_REGEX)
        lex.add_keywords(kw.KEYWORDS_COMMON)
        reduced = _flat("select rownum, qualify from dual", sp)
    finally:
        _restore(sp)
    return [reduced, _flat("select rownum, qualify from dual", sp)]


def probe_split_unchanged(ctx):
    sp = _sp(ctx)
    return [sp.split("select 1; select 'a;b'; -- c\nselect 3"),
            sp.split("create function f() returns int as $$ begin return 1; end; $$ language plpgsql; select 2;")]


def probe_format_unchanged(ctx):
    sp = _sp(ctx)
    sql = "select a, b as bee from t where x in (1,2) and y=3 -- note\norder by a"
    return [sp.format(sql, reindent=True, keyword_case="upper"), sp.format(sql, strip_comments=True),
            sp.format("select 'it''s', \"q\" from t", identifier_case="upper")]


def probe_identifiers_unchanged(ctx):
    sp = _sp(ctx)
    stmt = sp.parse("select t.a as x, count(*) c from schema1.tbl t join u on t.id = u.id")[0]
    ids = [t for t in stmt.get_sublists()]
    return [[type(t).__name__, t.get_real_name(), t.get_alias(), t.get_parent_name()] for t in ids]


def probe_statement_types_unchanged(ctx):
    sp = _sp(ctx)
    return [sp.parse(s)[0].get_type() for s in ["select 1", "insert into t values (1)", "create table t as select 1",
                                                 "with x as (select 1) select * from x", "drop table t",
                                                 "update t set a = 1"]]


def probe_comments_and_hints_unchanged(ctx):
    sp = _sp(ctx)
    return [_flat("select /*+ index(t) */ a -- c\nfrom t # d\n", sp), _flat("select distinctrow a from t", sp)]
