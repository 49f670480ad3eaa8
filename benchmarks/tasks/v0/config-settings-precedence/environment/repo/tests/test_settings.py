import unittest

from app.settings import DEFAULTS, load


class SettingsTest(unittest.TestCase):
    def test_defaults(self):
        self.assertEqual(load(None, environ={}), DEFAULTS)


if __name__ == "__main__":
    unittest.main()
