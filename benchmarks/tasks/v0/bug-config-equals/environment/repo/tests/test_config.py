import unittest

from app.config import parse


class ConfigTest(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(parse("a = 1\n# c\n\nB=two\n"), {"a": "1", "b": "two"})


if __name__ == "__main__":
    unittest.main()
