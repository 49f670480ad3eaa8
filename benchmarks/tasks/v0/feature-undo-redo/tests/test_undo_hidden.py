import unittest

from editor import Buffer


class HiddenUndoTest(unittest.TestCase):
    def test_undo_each_kind(self):
        b = Buffer("hello world")
        b.insert(5, ",")
        b.delete(0, 1)
        b.replace("o", "0")
        self.assertEqual(b.text, "ell0, w0rld")
        self.assertTrue(b.undo())
        self.assertEqual(b.text, "ello, world")
        self.assertTrue(b.undo())
        self.assertEqual(b.text, "hello, world")
        self.assertTrue(b.undo())
        self.assertEqual(b.text, "hello world")
        self.assertFalse(b.undo())
        self.assertEqual(b.text, "hello world")

    def test_redo(self):
        b = Buffer("abc")
        b.insert(3, "d")
        b.delete(0, 1)
        b.undo()
        b.undo()
        self.assertTrue(b.redo())
        self.assertEqual(b.text, "abcd")
        self.assertTrue(b.redo())
        self.assertEqual(b.text, "bcd")
        self.assertFalse(b.redo())

    def test_new_edit_clears_redo(self):
        b = Buffer("abc")
        b.insert(0, "x")
        b.undo()
        b.insert(3, "y")
        self.assertFalse(b.redo())
        self.assertEqual(b.text, "abcy")
        self.assertTrue(b.undo())
        self.assertEqual(b.text, "abc")

    def test_noops_and_errors_not_recorded(self):
        b = Buffer("abc")
        b.insert(1, "")
        b.delete(2, 2)
        self.assertEqual(b.replace("zz", "y"), 0)
        with self.assertRaises(IndexError):
            b.insert(10, "x")
        with self.assertRaises(ValueError):
            b.delete(2, 1)
        self.assertFalse(b.undo())

    def test_history_limit(self):
        b = Buffer("", history_limit=3)
        for ch in "abcde":
            b.insert(len(b.text), ch)
        self.assertTrue(b.undo() and b.undo() and b.undo())
        self.assertFalse(b.undo())
        self.assertEqual(b.text, "ab")
        self.assertTrue(b.redo())
        self.assertEqual(b.text, "abc")

    def test_delete_returns_text_still(self):
        b = Buffer("hello")
        self.assertEqual(b.delete(1, 3), "el")
        b.undo()
        self.assertEqual(b.text, "hello")


if __name__ == "__main__":
    unittest.main()
