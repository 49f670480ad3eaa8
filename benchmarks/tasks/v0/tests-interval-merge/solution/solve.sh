#!/usr/bin/env bash
set -euo pipefail
cat > tests/test_intervals.py <<'PY'
import unittest

from intervals import merge, total_length


class MergeTest(unittest.TestCase):
    def test_overlapping_and_unsorted(self):
        self.assertEqual(merge([(5, 8), (1, 3), (2, 4)]), [(1, 4), (5, 8)])

    def test_touching_are_merged(self):
        self.assertEqual(merge([(1, 3), (3, 5)]), [(1, 5)])

    def test_nested(self):
        self.assertEqual(merge([(1, 10), (2, 3)]), [(1, 10)])

    def test_empty_intervals_dropped(self):
        self.assertEqual(merge([(2, 2), (4, 6)]), [(4, 6)])
        self.assertEqual(merge([]), [])

    def test_invalid(self):
        with self.assertRaises(ValueError):
            merge([(3, 1)])

    def test_input_not_modified(self):
        data = [(5, 6), (1, 2)]
        merge(data)
        self.assertEqual(data, [(5, 6), (1, 2)])

    def test_total_length(self):
        self.assertEqual(total_length([(0, 5), (3, 8), (10, 11)]), 9)
        self.assertEqual(total_length([]), 0)
PY
