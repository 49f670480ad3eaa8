import datetime as dt
import unittest

from reports.dates import in_week, week_bounds
from reports.weekly import daily_totals, weekly_total

D = dt.datetime


class HiddenWeekTest(unittest.TestCase):
    def test_sunday_is_in_the_week(self):
        self.assertTrue(in_week(D(2024, 3, 10, 10), dt.date(2024, 3, 4)))
        self.assertTrue(in_week(D(2024, 3, 10, 23, 59, 59, 999999), dt.date(2024, 3, 6)))

    def test_next_monday_is_not(self):
        self.assertFalse(in_week(D(2024, 3, 11), dt.date(2024, 3, 4)))
        self.assertTrue(in_week(D(2024, 3, 4), dt.date(2024, 3, 10)))
        self.assertFalse(in_week(D(2024, 3, 3, 23, 59), dt.date(2024, 3, 4)))

    def test_bounds(self):
        self.assertEqual(week_bounds(dt.date(2024, 3, 7)), (D(2024, 3, 4), D(2024, 3, 11)))

    def test_report_totals(self):
        sales = [(D(2024, 3, 4, 9), 1250), (D(2024, 3, 9, 11), 2500), (D(2024, 3, 10, 10), 3100),
                 (D(2024, 3, 10, 23, 59), 700), (D(2024, 3, 11), 5000)]
        self.assertEqual(weekly_total(sales, dt.date(2024, 3, 4)), 7550)
        self.assertEqual(daily_totals(sales, dt.date(2024, 3, 4))[dt.date(2024, 3, 10)], 3800)


if __name__ == "__main__":
    unittest.main()
