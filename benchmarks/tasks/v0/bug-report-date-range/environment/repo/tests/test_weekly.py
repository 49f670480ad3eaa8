import datetime as dt
import unittest

from reports.weekly import weekly_total


class WeeklyTest(unittest.TestCase):
    def test_midweek_sales(self):
        sales = [(dt.datetime(2024, 3, 5, 12), 100), (dt.datetime(2024, 3, 6, 12), 200)]
        self.assertEqual(weekly_total(sales, dt.date(2024, 3, 6)), 300)


if __name__ == "__main__":
    unittest.main()
