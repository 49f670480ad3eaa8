import contextlib
import io
import os
import tempfile
import unittest

from hookops import __main__ as cli
from hookops import signing

from tests.fixture import build


class CliTest(unittest.TestCase):
    def run_cli(self, *argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(list(argv))
        return code, out.getvalue()

    def test_report_and_health(self):
        d = build()
        code, out = self.run_cli("report", d)
        self.assertEqual(code, 0)
        self.assertIn("queued", out)
        code, out = self.run_cli("health", d, "--top", "2")
        self.assertEqual(len(out.splitlines()), 2)
        self.assertEqual(self.run_cli("replay-plan", d, "ep_2")[1], "")
        self.assertIn("followed a 308", self.run_cli("timeline", d, "dl_e")[1])
        self.assertIn("SLA 60.0%", self.run_cli("tenants", d)[1])

    def test_verify(self):
        with tempfile.NamedTemporaryFile("wb", delete=False) as f:
            f.write(b"body")
        try:
            value = signing.header("s", b"body", 1000)
            self.assertEqual(self.run_cli("verify", "s", f.name, value, "--now", "1010")[0], 0)
            self.assertEqual(self.run_cli("verify", "t", f.name, value, "--now", "1010")[0], 1)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
