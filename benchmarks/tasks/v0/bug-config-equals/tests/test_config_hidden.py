import os
import tempfile
import unittest

from app.config import ConfigError, load, parse


class HiddenConfigTest(unittest.TestCase):
    def test_value_with_equals(self):
        url = "postgres://svc:pw@db/billing?sslmode=require&application_name=billing"
        self.assertEqual(parse(f"database_url = {url}\n")["database_url"], url)

    def test_value_with_hash_and_equals(self):
        self.assertEqual(parse("token = a=b#c==\n")["token"], "a=b#c==")

    def test_empty_value_and_case(self):
        self.assertEqual(parse("Empty =\nKEY= x = y \n"), {"empty": "", "key": "x = y"})

    def test_error_names_line(self):
        with self.assertRaisesRegex(ConfigError, "line 2"):
            parse("a = 1\nnot a setting\n")

    def test_repository_settings(self):
        self.assertTrue(load("settings.conf")["database_url"].endswith("sslmode=require&application_name=billing"))


if __name__ == "__main__":
    unittest.main()
