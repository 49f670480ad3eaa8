import random
import unittest

from stats.summary import median, percentile, summarize


def reference(xs, p):
    data = sorted(xs)
    pos = (len(data) - 1) * p / 100
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] * (1 - (pos - lo)) + data[hi] * (pos - lo)


class HiddenPercentileTest(unittest.TestCase):
    def test_median(self):
        self.assertEqual(median([3, 1, 2]), 2)
        self.assertEqual(median([4, 1, 3, 2]), 2.5)
        self.assertEqual(median([7]), 7)

    def test_known_values(self):
        xs = [15, 20, 35, 40, 50]
        self.assertAlmostEqual(percentile(xs, 0), 15)
        self.assertAlmostEqual(percentile(xs, 100), 50)
        self.assertAlmostEqual(percentile(xs, 40), 29)
        self.assertAlmostEqual(percentile(xs, 90), 46)
        self.assertAlmostEqual(percentile([1, 2, 3, 4], 25), 1.75)

    def test_random_against_reference(self):
        rng = random.Random(1)
        for _ in range(200):
            xs = [rng.uniform(-100, 100) for _ in range(rng.randint(1, 30))]
            p = rng.choice([0, 1, 12.5, 50, 90, 99, 100, rng.uniform(0, 100)])
            self.assertAlmostEqual(percentile(xs, p), reference(xs, p), places=9)

    def test_errors_and_no_mutation(self):
        for bad in ((lambda: median([])), (lambda: percentile([], 50)), (lambda: percentile([1], -1)),
                    (lambda: percentile([1], 100.5))):
            with self.assertRaises(ValueError):
                bad()
        xs = [3, 1, 2]
        percentile(xs, 50)
        self.assertEqual(xs, [3, 1, 2])

    def test_summary(self):
        s = summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        self.assertAlmostEqual(s["median"], 5.5)
        self.assertAlmostEqual(s["p90"], 9.1)
        self.assertEqual(s["n"], 10)


if __name__ == "__main__":
    unittest.main()
