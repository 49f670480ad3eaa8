"""Probes of real-lark-strict-mode: what the workspace's lark answers (bench/verdict_runner.py).

Fail-to-pass (lark 1.1.6, the items the history commit documents; the release's own test ported and the docs'
examples): `Lark(..., strict=True)` refuses, for the LALR parser, a grammar with a shift/reduce conflict
(GrammarError) and terminals whose regexes collide (LexError; without the optional `interegular` library, which the
sandbox lacks, any grammar on the basic or contextual lexer raises, as the docs say), and leaves Earley alone; a
grammar may hold Python-style `#` comments (whole lines, after rules, terminals and directives, in the grammar of
Lark's own syntax too), while `#` inside a literal or a regex stays a character; a shift/reduce conflict that LALR
resolves as shift is reported through lark's logger as debug messages, and as warnings under debug=True.
Pass-to-pass: parsing, trees, transformers, positions, the interactive parser, `//` comments and the errors of
lark 1.1.5.

Exceptions are answered by class name only; no probe asks for a message's wording except the shift/reduce notices,
whose text the docs show.
"""

import logging
import os
import sys


def _lark(ctx):
    """The workspace's lark (imported from the repository root, never an installed copy)."""
    root = ctx.path(".")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("lark")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("lark came from %s, not the workspace" % mod.__file__)
    return mod


def _tree(t):
    """A tree as plain data: [rule, children...], tokens as [type, value]."""
    if hasattr(t, "data") and hasattr(t, "children"):
        data = t.data
        return [str(getattr(data, "value", data))] + [_tree(c) for c in t.children]
    if hasattr(t, "type"):
        return [str(t.type), str(t)]
    return t


def _build(ctx, grammar, **options):
    """[error class name or None, the parser]."""
    lark = _lark(ctx)
    try:
        return [None, lark.Lark(grammar, **options)]
    except Exception as e:  # noqa: BLE001 -- the class is the answer
        return [type(e).__name__, None]


def _parse(ctx, grammar, texts, **options):
    err, parser = _build(ctx, grammar, **options)
    if err:
        return {"build": err}
    out = []
    for text in texts:
        try:
            out.append(_tree(parser.parse(text)))
        except Exception as e:  # noqa: BLE001
            out.append({"parse": type(e).__name__})
    return out


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = []

    def emit(self, record):
        self.seen.append([record.levelname, record.getMessage()])


def _notices(ctx, grammar, level=logging.DEBUG, **options):
    """What lark's logger says while a parser is built: [level, message] of each record, in order."""
    lark = _lark(ctx)
    log = logging.getLogger("lark")
    handler = _Records()
    old = log.level
    log.addHandler(handler)
    log.setLevel(level)
    try:
        lark.Lark(grammar, **options)
    finally:
        log.removeHandler(handler)
        log.setLevel(old)
    return handler.seen


SHIFT_REDUCE = 'start: a "."\na: "."+\n'
SHIFT_REDUCE_DOCS = 'start: as as\nas: a*\na: "a"\n'
COLLIDING = 'start: A | B\n\nA: /e?rez/\nB: /erez?/\n'
EXPR = '''
start: expr
expr: expr "+" expr | NUMBER
%import common.NUMBER
%ignore " "
'''
CALC = '''
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul
?atom: NUMBER -> number | "(" sum ")"
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
'''


# -- strict mode ---------------------------------------------------------------------------------------------------

def probe_strict_shift_reduce(ctx):
    """The release's test: a shift/reduce conflict under strict=True."""
    return [_build(ctx, SHIFT_REDUCE, parser="lalr", strict=True)[0],
            _build(ctx, SHIFT_REDUCE_DOCS, parser="lalr", strict=True)[0],
            _build(ctx, EXPR, parser="lalr", strict=True)[0]]


def probe_strict_shift_reduce_lexers(ctx):
    return [_build(ctx, SHIFT_REDUCE, parser="lalr", lexer="basic", strict=True)[0],
            _build(ctx, SHIFT_REDUCE, parser="lalr", lexer="contextual", strict=True)[0]]


def probe_strict_with_other_options(ctx):
    return [_build(ctx, EXPR, parser="lalr", strict=True, debug=True)[0],
            _build(ctx, SHIFT_REDUCE, parser="lalr", strict=True, start=["start", "a"])[0],
            _build(ctx, SHIFT_REDUCE_DOCS, parser="lalr", strict=True, keep_all_tokens=True)[0]]


def probe_strict_regex_collision(ctx):
    """The release's test: colliding terminals under strict=True (no interegular in the sandbox)."""
    return [_build(ctx, COLLIDING, parser="lalr", strict=True)[0],
            _build(ctx, COLLIDING, parser="lalr", lexer="basic", strict=True)[0]]


def probe_strict_without_interegular(ctx):
    """The docs: without interegular, strict mode raises (basic and contextual lexers)."""
    return [_build(ctx, CALC, parser="lalr", strict=True)[0],
            _build(ctx, 'start: "a" "b"\n', parser="lalr", lexer="basic", strict=True)[0]]


def probe_strict_errors_are_lark_errors(ctx):
    lark = _lark(ctx)
    out = []
    for grammar in (SHIFT_REDUCE, COLLIDING):
        try:
            lark.Lark(grammar, parser="lalr", strict=True)
            out.append(None)
        except lark.exceptions.LarkError as e:
            out.append([isinstance(e, lark.exceptions.GrammarError), isinstance(e, lark.exceptions.LexError)])
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
    return out


def probe_strict_earley_untouched(ctx):
    """The docs: strict mode only applies to LALR."""
    return [_parse(ctx, SHIFT_REDUCE, ["...", "."], parser="earley", strict=True),
            _parse(ctx, COLLIDING, ["erez", "rez"], parser="earley", strict=True)]


def probe_strict_off_resolves_as_shift(ctx):
    return [_parse(ctx, SHIFT_REDUCE_DOCS, ["aaa", ""], parser="lalr"),
            _parse(ctx, EXPR, ["1 + 2 + 3"], parser="lalr", strict=False),
            _parse(ctx, COLLIDING, ["erez", "rez"], parser="lalr", strict=False)]


def probe_strict_option_value(ctx):
    lark = _lark(ctx)
    p = lark.Lark('start: "a"\n', parser="lalr")
    q = lark.Lark('start: "a"\n', parser="earley", strict=True)
    return [p.options.strict, q.options.strict, lark.Lark('start: "x"\n').options.strict]


# -- `#` comments --------------------------------------------------------------------------------------------------

def probe_hash_comment_lines(ctx):
    grammar = '''
# A list of numbers
start: item+
# one item
item: NUMBER ","?
# the terminals
%import common.NUMBER
%ignore " "
'''
    return [_parse(ctx, grammar, ["1, 2, 3", "4"], parser="lalr"), _parse(ctx, grammar, ["5 6"])]


def probe_hash_comment_trailing(ctx):
    grammar = '''
start: pair ("," pair)*   # one or more pairs
pair: KEY "=" VALUE       # key=value
KEY: /[a-z]+/             # lower-case keys
VALUE: /[0-9]+/ # digits only
%ignore " "  # spaces between anything
'''
    return [_parse(ctx, grammar, ["a=1, b=22"], parser="lalr"), _parse(ctx, grammar, ["zz = 7"], parser="earley")]


def probe_hash_and_slash_comments(ctx):
    grammar = '''
// C++ style
start: WORD+   // words
# Python style
WORD: /\\w+/   # letters
%ignore " "
'''
    return _parse(ctx, grammar, ["ab cd", "x"], parser="lalr")


def probe_hash_inside_literals_and_regexes(ctx):
    grammar = '''
start: (TAG | line | note)+   # tags, lines and notes
line: "#" WORD                # a hash, then a word
note: "( #" WORD ")"          # a note
TAG: /@[a-z]+/
WORD: /[a-z]+/
COMMENT: /;[^\\n]*/
%ignore COMMENT
%ignore " "
'''
    shell = '''
start: WORD+
WORD: /[a-z]+/
SH_COMMENT: /#[^\\n]*/   # the user's own comments, in the text parsed
%ignore SH_COMMENT
%ignore " "
'''
    return [_parse(ctx, grammar, ["#abc @t #d", "( #n) #e"], parser="lalr"),
            _parse(ctx, shell, ["ab #cd ef", "x # y"], parser="lalr")]


def probe_hash_comment_rule_options(ctx):
    grammar = '''
?start: sum            # inlined when it has one child
?sum: atom ("+" atom)* # sums
atom: NUMBER -> number # a number
%import common.NUMBER  # from the common library
%ignore " "
'''
    return [_parse(ctx, grammar, ["1 + 2", "3"], parser="lalr"), _parse(ctx, grammar, ["4+5+6"])]


def probe_hash_comment_after_directives(ctx):
    grammar = '''
start: WORD ":" NUMBER
%import common (WORD, NUMBER)   # two at once
%import common.WS               # and spaces
%ignore WS                      # between everything
'''
    return _parse(ctx, grammar, ["abc: 12", "x :3"], parser="lalr")


def probe_lark_grammar_of_lark_reads_hash_comments(ctx):
    """The grammar of Lark's own syntax (lark/grammars/lark.lark) parses a grammar with `#` comments."""
    lark = _lark(ctx)
    try:
        meta = lark.Lark.open_from_package("lark", "lark.lark", ("grammars",), parser="lalr")
    except Exception as e:  # noqa: BLE001
        return {"build": type(e).__name__}
    out = []
    for text in ('# numbers\nstart: NUMBER+ # one or more\nNUMBER: /[0-9]+/\n',
                 '// old\nstart: "a" // a\n# new\n'):
        try:
            t = meta.parse(text)
            out.append(sorted({str(getattr(s.data, "value", s.data)) for s in t.iter_subtrees()}))
        except Exception as e:  # noqa: BLE001
            out.append({"parse": type(e).__name__})
    return out


# -- shift/reduce notices ------------------------------------------------------------------------------------------

def probe_shift_reduce_debug_notices(ctx):
    seen = _notices(ctx, SHIFT_REDUCE_DOCS, parser="lalr")
    return sorted(r for r in seen if "Shift/Reduce" in r[1])


def probe_shift_reduce_notices_levels(ctx):
    quiet = _notices(ctx, SHIFT_REDUCE, level=logging.INFO, parser="lalr")
    loud = _notices(ctx, SHIFT_REDUCE, level=logging.DEBUG, parser="lalr")
    return [[r for r in quiet if "Shift/Reduce" in r[1]],
            sorted({r[0] for r in loud if "Shift/Reduce" in r[1]})]


def probe_shift_reduce_warnings_under_debug(ctx):
    seen = _notices(ctx, SHIFT_REDUCE_DOCS, level=logging.WARNING, parser="lalr", debug=True)
    return sorted(r for r in seen if "Shift/Reduce" in r[1] or r[1].startswith(" * "))


def probe_no_notices_for_clean_grammar(ctx):
    seen = _notices(ctx, CALC, parser="lalr")
    return [r for r in seen if "conflict" in r[1].lower() or "collision" in r[1].lower()]


# -- pass-to-pass --------------------------------------------------------------------------------------------------

def probe_calc_lalr(ctx):
    return _parse(ctx, CALC, ["1 + 2 * (3 - 4)", "7", "2*3*4"], parser="lalr")


def probe_earley_ambiguity(ctx):
    grammar = '''
start: x
x: x "+" x | "a"
'''
    lark = _lark(ctx)
    p = lark.Lark(grammar, parser="earley", ambiguity="explicit")
    t = p.parse("a+a+a")
    return [_tree(t)[0], len([s for s in t.iter_subtrees() if s.data == "_ambig"]), len(t.children[0].children)]


def probe_transformer(ctx):
    lark = _lark(ctx)

    class Calc(lark.Transformer):
        def number(self, items):
            return int(items[0])

        def add(self, items):
            return items[0] + items[1]

        def sub(self, items):
            return items[0] - items[1]

        def mul(self, items):
            return items[0] * items[1]

    p = lark.Lark(CALC, parser="lalr", transformer=Calc())
    return [p.parse("1 + 2 * (3 - 4)"), p.parse("10-3-2"), Calc().transform(lark.Lark(CALC).parse("2*5"))]


def probe_positions(ctx):
    lark = _lark(ctx)
    p = lark.Lark('start: WORD+\nWORD: /[a-z]+/\n%ignore /\\s+/\n', parser="lalr", propagate_positions=True)
    t = p.parse("ab\n  cd ef")
    m = t.meta
    return [[m.line, m.column, m.end_line, m.end_column, m.start_pos, m.end_pos],
            [[tok.line, tok.column, tok.end_line, tok.end_column] for tok in t.children]]


def probe_errors_of_old(ctx):
    lark = _lark(ctx)
    out = [ctx.raises(lark.exceptions.ConfigurationError, lark.Lark, 'start: "a"\n', not_an_option=1),
           ctx.raises(lark.exceptions.GrammarError, lark.Lark, 'start: a\na: "x"\na: "y"\n'),
           _build(ctx, 'start: a | b\na: "x"\nb: "x"\n', parser="lalr")[0],
           _build(ctx, 'start: undefined_rule\n')[0]]
    p = lark.Lark(CALC, parser="lalr")
    out.append(ctx.raises(lark.exceptions.UnexpectedInput, p.parse, "1 + + 2"))
    out.append(ctx.raises(lark.exceptions.UnexpectedCharacters, p.parse, "1 $ 2"))
    return out


def probe_interactive_parser(ctx):
    lark = _lark(ctx)
    p = lark.Lark(CALC, parser="lalr")
    ip = p.parse_interactive("1 + 2")
    types = [tok.type for tok in ip.iter_parse()]
    return [types, sorted(ip.accepts())]


def probe_slash_comments_and_templates(ctx):
    grammar = '''
start: _sep{item, ","}   // a template
_sep{x, sep}: x (sep x)*
item: WORD
WORD: /[a-z]+/
%ignore " "
'''
    return _parse(ctx, grammar, ["a, b, c"], parser="lalr")
