import unittest

from hookops import report

from tests.fixture import T0, build


class ReportTest(unittest.TestCase):
    def test_by_day(self):
        d = build()
        table = report.by_day(d, report.week_start(d))
        self.assertEqual(sorted(table), [0])
        row = table[0]
        self.assertEqual((row["queued"], row["delivered"], row["dead"], row["failed"]), (5, 3, 1, 1))
        self.assertEqual((row["attempts"], row["manual"]), (15, 1))
        self.assertAlmostEqual(row["p50_s"], 4.8, places=3)
        self.assertIn("d0", report.render(table))
        self.assertEqual(report.week_start(d), T0)

    def test_percentile(self):
        self.assertIsNone(report.percentile([], 0.5))
        self.assertEqual(report.percentile([5, 1, 3], 0.5), 3)
        self.assertEqual(report.percentile(list(range(1, 101)), 0.95), 95)


if __name__ == "__main__":
    unittest.main()
