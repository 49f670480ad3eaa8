import unittest

from kv import Store


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class HiddenTtlTest(unittest.TestCase):
    def setUp(self):
        self.clock = Clock()
        self.s = Store(clock=self.clock)

    def test_expiry(self):
        self.s.set("a", 1, ttl=10)
        self.s.set("b", 2)
        self.clock.now += 9.5
        self.assertEqual((self.s.get("a"), len(self.s), self.s.keys()), (1, 2, ["a", "b"]))
        self.assertAlmostEqual(self.s.ttl("a"), 0.5)
        self.clock.now += 0.5
        self.assertIsNone(self.s.get("a"))
        self.assertEqual(self.s.get("a", "gone"), "gone")
        self.assertNotIn("a", self.s)
        self.assertEqual((len(self.s), self.s.keys()), (1, ["b"]))
        with self.assertRaises(KeyError):
            self.s.delete("a")
        with self.assertRaises(KeyError):
            self.s.ttl("a")
        self.assertIsNone(self.s.ttl("b"))

    def test_reset_replaces_expiry(self):
        self.s.set("k", 1, ttl=5)
        self.clock.now += 4
        self.s.set("k", 2, ttl=5)
        self.clock.now += 4
        self.assertEqual(self.s.get("k"), 2)
        self.s.set("k", 3)
        self.clock.now += 1000
        self.assertEqual(self.s.get("k"), 3)

    def test_purge(self):
        for i in range(5):
            self.s.set(i, i, ttl=i + 1)
        self.s.set("forever", 0)
        self.clock.now += 3
        self.assertEqual(self.s.purge(), 3)
        self.assertEqual(self.s.purge(), 0)
        self.assertEqual(len(self.s), 3)
        self.assertIn("forever", self.s)

    def test_bad_ttl(self):
        for bad in (0, -1):
            with self.assertRaises(ValueError):
                self.s.set("x", 1, ttl=bad)

    def test_default_clock(self):
        s = Store()
        s.set("x", 1, ttl=60)
        self.assertEqual(s.get("x"), 1)


if __name__ == "__main__":
    unittest.main()
