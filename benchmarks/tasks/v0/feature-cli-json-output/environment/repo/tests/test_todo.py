import os
import subprocess
import sys
import tempfile
import unittest


class TodoTest(unittest.TestCase):
    def test_add_done_list(self):
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "t.txt")
            for args in (["add", "milk"], ["add", "eggs"], ["done", "1"]):
                subprocess.run([sys.executable, "-m", "todo", "--file", f, *args], check=True)
            out = subprocess.run([sys.executable, "-m", "todo", "--file", f, "list"], capture_output=True, text=True)
            self.assertEqual(out.stdout, "[x] 1. milk\n[ ] 2. eggs\n")


if __name__ == "__main__":
    unittest.main()
