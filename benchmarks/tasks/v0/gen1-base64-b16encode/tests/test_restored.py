"""The restored function must live in the vendored module (not be borrowed from the standard library)."""

import inspect
import unittest

from vendored import base64


class RestoredTest(unittest.TestCase):
    def test_defined_in_the_vendored_module(self):
        fn = inspect.unwrap(base64.b16encode)
        self.assertEqual(fn.__module__, "vendored.base64")
        self.assertTrue(fn.__code__.co_filename.endswith("vendored/base64.py"), fn.__code__.co_filename)


if __name__ == "__main__":
    unittest.main()
