"""The restored function must live in the vendored module (not be borrowed from the standard library)."""

import inspect
import unittest

from vendored import fnmatch


class RestoredTest(unittest.TestCase):
    def test_defined_in_the_vendored_module(self):
        fn = inspect.unwrap(fnmatch.fnmatch)
        self.assertEqual(fn.__module__, "vendored.fnmatch")
        self.assertTrue(fn.__code__.co_filename.endswith("vendored/fnmatch.py"), fn.__code__.co_filename)


if __name__ == "__main__":
    unittest.main()
