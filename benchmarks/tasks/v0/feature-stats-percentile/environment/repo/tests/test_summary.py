import unittest

from stats.summary import mean, summarize, variance


class SummaryTest(unittest.TestCase):
    def test_mean_variance(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)
        self.assertEqual(variance([1, 1, 1]), 0)
        self.assertEqual(summarize([2, 4])["std"], 1.0)


if __name__ == "__main__":
    unittest.main()
