#!/usr/bin/env bash
set -euo pipefail
cat > tests/test_lru.py <<'PY'
import unittest

from lru import LRUCache


class LRUTest(unittest.TestCase):
    def test_eviction_order(self):
        evicted = []
        c = LRUCache(2, on_evict=lambda k, v: evicted.append((k, v)))
        c.put("a", 1)
        c.put("b", 2)
        c.put("c", 3)
        self.assertEqual(evicted, [("a", 1)])
        self.assertEqual(c.keys(), ["b", "c"])
        self.assertEqual(len(c), 2)

    def test_get_refreshes(self):
        c = LRUCache(2)
        c.put("a", 1)
        c.put("b", 2)
        self.assertEqual(c.get("a"), 1)
        c.put("c", 3)
        self.assertEqual(c.keys(), ["a", "c"])

    def test_put_existing_refreshes_and_updates(self):
        c = LRUCache(2)
        c.put("a", 1)
        c.put("b", 2)
        c.put("a", 10)
        c.put("c", 3)
        self.assertEqual(c.keys(), ["a", "c"])
        self.assertEqual(c.peek("a"), 10)

    def test_peek_and_contains_do_not_refresh(self):
        c = LRUCache(2)
        c.put("a", 1)
        c.put("b", 2)
        self.assertEqual(c.peek("a"), 1)
        self.assertIn("a", c)
        c.put("c", 3)
        self.assertNotIn("a", c)
        self.assertEqual(c.peek("zz", "d"), "d")

    def test_capacity_exact(self):
        c = LRUCache(3)
        for i in range(3):
            c.put(i, i)
        self.assertEqual(len(c), 3)
        c.put(3, 3)
        self.assertEqual(c.keys(), [1, 2, 3])

    def test_zero_and_negative_capacity(self):
        c = LRUCache(0)
        c.put("a", 1)
        self.assertEqual((len(c), c.get("a")), (0, None))
        for bad in (-1, -2):
            with self.assertRaises(ValueError):
                LRUCache(bad)

    def test_hits_and_misses(self):
        c = LRUCache(1)
        c.put("a", 1)
        c.get("a")
        c.get("b", 0)
        c.peek("a")
        self.assertEqual((c.hits, c.misses), (1, 1))
PY
