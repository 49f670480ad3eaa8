"""The restored function must live in the vendored module (not be borrowed from the standard library)."""

import inspect
import unittest

from vendored import string


class RestoredTest(unittest.TestCase):
    def test_defined_in_the_vendored_module(self):
        fn = inspect.unwrap(string.capwords)
        self.assertEqual(fn.__module__, "vendored.string")
        self.assertTrue(fn.__code__.co_filename.endswith("vendored/string.py"), fn.__code__.co_filename)


if __name__ == "__main__":
    unittest.main()
