import contextlib
import io
import unittest

from authops import __main__ as cli
from authops import feeds, report, traffic

from tests.fixture import T0, build


class ReportTrafficTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_report(self):
        self.assertEqual(report.week_start(self.dir), T0)
        row = report.by_day(self.dir, T0)[0]
        self.assertEqual((row["login"], row["refresh"], row["grace"], row["revoke"], row["logout:user"],
                          row["expire"]), (1, 2, 1, 1, 1, 1))
        self.assertEqual(row["ended:revoked_reuse"], 1)
        self.assertIn("d0", report.render({0: row}))

    def test_traffic(self):
        routes = traffic.by_route(feeds.iter_gateway(self.dir))
        self.assertEqual(routes[("POST", "/oauth/token")]["requests"], 5)
        self.assertEqual(routes[("POST", "/oauth/token")]["client_errors"], 1)
        self.assertEqual(routes[("GET", "/v1/feed")]["errors"], 1)
        self.assertEqual(traffic.by_upstream(feeds.iter_gateway(self.dir))["a2"], 2)

    def test_cli(self):
        for argv in (["report", self.dir], ["traffic", self.dir], ["review", self.dir],
                     ["session", self.dir, "fam_a"]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(cli.main(argv), 0)
            self.assertTrue(out.getvalue().strip(), argv)


if __name__ == "__main__":
    unittest.main()
