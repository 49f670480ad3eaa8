"""The restored function must live in the vendored module (not be borrowed from the standard library)."""

import inspect
import unittest

from vendored import quopri


class RestoredTest(unittest.TestCase):
    def test_defined_in_the_vendored_module(self):
        fn = inspect.unwrap(quopri.decode)
        self.assertEqual(fn.__module__, "vendored.quopri")
        self.assertTrue(fn.__code__.co_filename.endswith("vendored/quopri.py"), fn.__code__.co_filename)


if __name__ == "__main__":
    unittest.main()
