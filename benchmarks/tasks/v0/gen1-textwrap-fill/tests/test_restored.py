"""The restored function must live in the vendored module (not be borrowed from the standard library)."""

import inspect
import unittest

from vendored import textwrap


class RestoredTest(unittest.TestCase):
    def test_defined_in_the_vendored_module(self):
        fn = inspect.unwrap(textwrap.fill)
        self.assertEqual(fn.__module__, "vendored.textwrap")
        self.assertTrue(fn.__code__.co_filename.endswith("vendored/textwrap.py"), fn.__code__.co_filename)


if __name__ == "__main__":
    unittest.main()
