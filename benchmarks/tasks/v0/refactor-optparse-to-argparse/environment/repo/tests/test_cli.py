import contextlib
import io
import os
import tempfile
import unittest

import wordstat


class CliTest(unittest.TestCase):
    def test_text(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "a.txt")
            with open(path, "w") as f:
                f.write("a b a\nc\n")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(wordstat.main([path]), 0)
            self.assertEqual(out.getvalue(), f"     2      4      8 {path}\n")


if __name__ == "__main__":
    unittest.main()
