import ast
import subprocess
import sys
import unittest

from shop import validators
from shop.orders import place_order
from shop.users import ValidationError, make_user

EMAILS = {"ann@example.com": True, "A.B+tag@sub.example.co.uk": True, " bo@example.org ": True,
          "no-at.example.com": False, "x@y": False, "x@y.c": False, "ann@exa mple.com": False, "ann@@example.com": False,
          "ann@example.COM": True, "ann@-.com": True}
PHONES = {"+442079460958": True, "+44 (20) 7946-0958": True, "555.123.4567": True, "12": False, "+1234567890123456": False,
          "phone": False, "0049 30 1234567": True}


class HiddenValidatorsTest(unittest.TestCase):
    def test_functions(self):
        for value, ok in EMAILS.items():
            self.assertEqual(bool(validators.is_email(value)), ok, value)
        for value, ok in PHONES.items():
            self.assertEqual(bool(validators.is_phone(value)), ok, value)

    def test_callers_agree_with_validators(self):
        for value, ok in EMAILS.items():
            for call in (lambda: make_user("Ann", value), lambda: place_order(["pen"], value)):
                if ok:
                    call()
                else:
                    self.assertRaises(ValidationError, call)
        for value, ok in PHONES.items():
            for call in (lambda: make_user("Ann", "a@b.io", value), lambda: place_order(["pen"], "a@b.io", value)):
                if ok:
                    call()
                else:
                    self.assertRaises(ValidationError, call)

    def test_no_regex_left_in_callers(self):
        for path in ("shop/users.py", "shop/orders.py"):
            tree = ast.parse(open(path).read())
            imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            self.assertNotIn("re", imported, path)
            self.assertIn("shop.validators", imported | {f"shop.{a.name}" for n in ast.walk(tree)
                                                           if isinstance(n, ast.ImportFrom) and n.module == "shop"
                                                           for a in n.names}, path)

    def test_visible_tests_pass(self):
        run = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()
