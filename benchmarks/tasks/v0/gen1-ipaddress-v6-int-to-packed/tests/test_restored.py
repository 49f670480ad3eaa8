"""The restored function must live in the vendored module (not be borrowed from the standard library)."""

import inspect
import unittest

from vendored import ipaddress


class RestoredTest(unittest.TestCase):
    def test_defined_in_the_vendored_module(self):
        fn = inspect.unwrap(ipaddress.v6_int_to_packed)
        self.assertEqual(fn.__module__, "vendored.ipaddress")
        self.assertTrue(fn.__code__.co_filename.endswith("vendored/ipaddress.py"), fn.__code__.co_filename)


if __name__ == "__main__":
    unittest.main()
