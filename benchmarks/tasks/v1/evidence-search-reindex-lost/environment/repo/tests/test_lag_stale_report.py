import contextlib
import io
import unittest

from searchops import __main__ as cli
from searchops import lag, report, stale

from tests.fixture import T0, build


class LagStaleReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_lags_and_backlog(self):
        self.assertEqual([round(x[1], 1) for x in lag.lags(self.dir)], [0.5, 1.0, 90.0])
        self.assertEqual(lag.backlog_spans(self.dir), [(T0 + 110, T0 + 110, 90.0)])
        self.assertEqual(lag.hourly_percentiles(self.dir)[0], [1.0, 90.0])

    def test_stale(self):
        rows = stale.stale_answers(self.dir)
        self.assertEqual([(r[1], r[2], r[3]) for r in rows], [("p_000002", 3, 4)])
        self.assertEqual(stale.by_doc(rows), {"p_000002": (1, 40.0)})
        self.assertEqual(stale.stale_answers(self.dir, min_age=60), [])

    def test_report(self):
        table = report.by_day(self.dir, report.week_start(self.dir))
        row = table[0]
        self.assertEqual((row["changes"], row["deletes"], row["writes"], row["dual_writes"], row["skips"]),
                         (3, 1, 3, 2, 1))
        self.assertEqual((row["reindexes"], row["aborted"], row["p50_lag"]), (2, 1, 1.0))
        self.assertIn("d0", report.render(table))

    def test_cli(self):
        for argv in (["report", self.dir], ["reindexes", self.dir], ["backlog", self.dir], ["stale", self.dir],
                     ["timeline", self.dir, "p_000001"], ["queries", self.dir]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(cli.main(argv), 0)
            self.assertTrue(out.getvalue().strip(), argv)


if __name__ == "__main__":
    unittest.main()
