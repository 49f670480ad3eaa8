import unittest

from kv import Store


class StoreTest(unittest.TestCase):
    def test_basics(self):
        s = Store()
        s.set("a", 1)
        s.set("b", 2)
        self.assertEqual((s.get("a"), s.get("z", 0), len(s), s.keys()), (1, 0, 2, ["a", "b"]))
        s.delete("a")
        self.assertNotIn("a", s)
        with self.assertRaises(KeyError):
            s.delete("a")


if __name__ == "__main__":
    unittest.main()
