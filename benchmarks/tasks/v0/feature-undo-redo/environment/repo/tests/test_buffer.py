import unittest

from editor import Buffer


class BufferTest(unittest.TestCase):
    def test_edits(self):
        b = Buffer("hello world")
        b.insert(5, ",")
        self.assertEqual(b.delete(0, 1), "h")
        self.assertEqual(b.replace("o", "0"), 2)
        self.assertEqual(b.text, "ell0, w0rld")
        with self.assertRaises(IndexError):
            b.insert(99, "x")


if __name__ == "__main__":
    unittest.main()
