"""Probes of feature-glob-doublestar: pathmatch.match over a table of patterns and paths (bench/verdict_runner.py)."""

CASES = [
    ("**/foo", "foo"), ("**/foo", "a/foo"), ("**/foo", "a/b/foo"), ("**/foo", "a/foox"), ("**/foo", "xfoo"),
    ("**/foo/bar", "foo/bar"), ("**/foo/bar", "x/foo/bar"), ("abc/**", "abc/d"), ("abc/**", "abc/d/e"),
    ("abc/**", "abc"), ("abc/**", "abcd/e"), ("a/**/b", "a/b"), ("a/**/b", "a/x/b"), ("a/**/b", "a/x/y/b"),
    ("a/**/b", "a/xb"), ("a/**/b", "ab"), ("a/**/b", "a/x/y/bc"), ("a/**/*.py", "a/m.py"), ("a/**/*.py", "a/p/q/m.py"),
    ("a/**/*.py", "b/a/m.py"), ("**/*.log", "x/y/z.log"), ("**/*.log", "z.log"), ("**/build/**", "build/x"),
    ("**/build/**", "p/build/x/y"), ("**/build/**", "p/build"), ("a**b", "axyb"), ("a**b", "ax/yb"),
    ("src/**/test_?.py", "src/t/test_a.py"), ("**", "anything/at/all"), ("*.py", "a/b.py"), ("a/*/b", "a/x/y/b"),
    ("a/?/b", "a//b"), ("[a-c]/**", "b/q"), ("[!a-c]/**", "b/q"),
]
NO_SLASH = [("*", "a/b"), ("a*", "a/b"), ("*b", "a/b"), ("a?c", "a/c"), ("[a/]", "a/b")]


def probe_table(ctx):
    match = ctx.load("pathmatch").match
    return [bool(match(p, s)) for p, s in CASES]


def probe_star_never_crosses_slash(ctx):
    match = ctx.load("pathmatch").match
    return [bool(match(p, s)) for p, s in NO_SLASH]
