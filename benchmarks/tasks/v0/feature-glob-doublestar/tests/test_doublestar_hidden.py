import unittest

from pathmatch import match

CASES = [
    ("**/foo", "foo", True), ("**/foo", "a/foo", True), ("**/foo", "a/b/foo", True), ("**/foo", "a/foox", False),
    ("**/foo", "xfoo", False), ("**/foo/bar", "foo/bar", True), ("**/foo/bar", "x/foo/bar", True),
    ("abc/**", "abc/d", True), ("abc/**", "abc/d/e", True), ("abc/**", "abc", False), ("abc/**", "abcd/e", False),
    ("a/**/b", "a/b", True), ("a/**/b", "a/x/b", True), ("a/**/b", "a/x/y/b", True), ("a/**/b", "a/xb", False),
    ("a/**/b", "ab", False), ("a/**/b", "a/x/y/bc", False), ("a/**/*.py", "a/m.py", True), ("a/**/*.py", "a/p/q/m.py", True),
    ("a/**/*.py", "b/a/m.py", False), ("**/*.log", "x/y/z.log", True), ("**/*.log", "z.log", True),
    ("**/build/**", "build/x", True), ("**/build/**", "p/build/x/y", True), ("**/build/**", "p/build", False),
    ("a**b", "axyb", True), ("a**b", "ax/yb", False), ("src/**/test_?.py", "src/t/test_a.py", True),
    ("**", "anything/at/all", True), ("*.py", "a/b.py", False), ("a/*/b", "a/x/y/b", False), ("a/?/b", "a//b", False),
    ("[a-c]/**", "b/q", True), ("[!a-c]/**", "b/q", False),
]


class HiddenDoubleStarTest(unittest.TestCase):
    def test_table(self):
        wrong = [(p, s, want) for p, s, want in CASES if bool(match(p, s)) != want]
        self.assertEqual(wrong, [])

    def test_star_never_crosses_slash(self):
        for pattern in ("*", "a*", "*b", "a?c", "[a/]"):
            self.assertFalse(match(pattern, "a/b" if pattern != "a?c" else "a/c"), pattern)


if __name__ == "__main__":
    unittest.main()
