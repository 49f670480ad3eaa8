import unittest

from pathmatch import match


class MatchTest(unittest.TestCase):
    def test_basics(self):
        self.assertTrue(match("*.py", "setup.py"))
        self.assertFalse(match("*.py", "pkg/setup.py"))
        self.assertTrue(match("src/?.c", "src/a.c"))
        self.assertTrue(match("[ab]*.txt", "b1.txt"))
        self.assertFalse(match("[!ab]*.txt", "b1.txt"))


if __name__ == "__main__":
    unittest.main()
