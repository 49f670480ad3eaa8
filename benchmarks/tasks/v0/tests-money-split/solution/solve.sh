#!/usr/bin/env bash
set -euo pipefail
cat > tests/test_money.py <<'PY'
import unittest

from money import allocate, split


class SplitTest(unittest.TestCase):
    def test_larger_first(self):
        self.assertEqual(split(10, 3), [4, 3, 3])
        self.assertEqual(split(11, 4), [3, 3, 3, 2])
        self.assertEqual(split(9, 3), [3, 3, 3])

    def test_negative(self):
        self.assertEqual(split(-10, 3), [-4, -3, -3])

    def test_sums_and_one_part(self):
        for total in (-7, 0, 1, 99, 1001):
            for parts in (1, 2, 7):
                got = split(total, parts)
                self.assertEqual(sum(got), total)
                self.assertLessEqual(max(got) - min(got), 1)
        self.assertEqual(split(5, 1), [5])

    def test_bad_parts(self):
        for parts in (0, -1):
            with self.assertRaises(ValueError):
                split(10, parts)


class AllocateTest(unittest.TestCase):
    def test_largest_remainder(self):
        self.assertEqual(allocate(100, [1, 1, 1]), [34, 33, 33])
        self.assertEqual(allocate(10, [3, 7]), [3, 7])
        self.assertEqual(allocate(10, [1, 2, 2]), [2, 4, 4])
        self.assertEqual(allocate(7, [2, 1, 1]), [3, 2, 2])

    def test_largest_remainder_not_first(self):
        self.assertEqual(allocate(5, [1, 3]), [1, 4])

    def test_sum_exact(self):
        for total in (0, 1, 17, 1000):
            self.assertEqual(sum(allocate(total, [5, 3, 2, 0])), total)

    def test_errors(self):
        for bad in ((-1, [1]), (10, [0, 0]), (10, [1, -1])):
            with self.assertRaises(ValueError):
                allocate(*bad)
PY
