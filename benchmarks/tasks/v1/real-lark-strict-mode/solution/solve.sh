#!/usr/bin/env bash
# The upstream change: lark 1.1.5 -> 1.1.6 for the items the history commit documents (strict mode: a shift/reduce
# conflict raises GrammarError, colliding terminals -- or no interegular to look for them -- raise LexError, LALR
# only; `#` comments in grammars; resolved shift/reduce conflicts as debug messages, warnings under debug=True):
# lark/lark.py, common.py, lexer.py, load_grammar.py, parser_frontends.py, parsers/grammar_analysis.py,
# parsers/lalr_analysis.py, parsers/lalr_parser.py, grammars/lark.lark and tests/test_parser.py taken whole from the
# 1.1.6 sdist, so the release's reformatting and other items in those files come along (sha256 cache digests,
# typing); made with `git diff` of the tree with the history replayed against the same tree with those files taken
# from the lark-1.1.6 sdist, as `python -m benchmarks.release_diff` makes it. The files end lines with CRLF.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
