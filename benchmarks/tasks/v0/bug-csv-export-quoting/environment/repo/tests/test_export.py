import unittest

from userexport import User, to_csv


class ExportTest(unittest.TestCase):
    def test_header_and_rows(self):
        text = to_csv([User(1, "Ann Lee", "ann@example.com", "pro")])
        self.assertEqual(text.splitlines(), ["id,name,email,plan", "1,Ann Lee,ann@example.com,pro"])


if __name__ == "__main__":
    unittest.main()
