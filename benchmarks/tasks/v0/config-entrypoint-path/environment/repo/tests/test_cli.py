import contextlib
import io
import unittest

from greeter.cli import main


class CliTest(unittest.TestCase):
    def test_hello(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["hello", "Ann", "--shout"])
        self.assertEqual(out.getvalue(), "HELLO, ANN!\n")


if __name__ == "__main__":
    unittest.main()
