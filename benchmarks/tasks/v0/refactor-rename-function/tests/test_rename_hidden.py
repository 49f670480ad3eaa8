import os
import re
import subprocess
import sys
import unittest
import warnings

from geometry import area
from geometry.report import table
from geometry.shapes import rectangle, total_area, triangle


class HiddenRenameTest(unittest.TestCase):
    def test_new_name(self):
        self.assertEqual(area.polygon_area(rectangle(3, 4)), 12)
        self.assertEqual(area.polygon_area(triangle(4, 3)), 6)
        self.assertEqual(area.polygon_area([(0, 0), (1, 1)]), 0.0)
        self.assertEqual(area.polygon_area([(0, 0), (0, 2), (2, 2), (2, 0)]), 4)

    def test_alias_warns(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertEqual(area.calc(rectangle(2, 5)), 10)
        self.assertTrue(any(issubclass(w.category, DeprecationWarning) for w in caught))

    def test_callers_use_the_new_name(self):
        for path in ("geometry/shapes.py", "geometry/report.py"):
            with open(path) as f:
                self.assertIsNone(re.search(r"\bcalc\b", f.read()), path)
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            self.assertEqual(total_area([rectangle(1, 1), triangle(2, 2)]), 3)
            self.assertIn("12.00", table({"r": rectangle(3, 4)}))

    def test_visible_tests_pass(self):
        run = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-m", "unittest", "discover", "-s",
                              "tests", "-t", "."], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])

    def test_cli(self):
        run = subprocess.run([sys.executable, "-m", "geometry.report", "shapes.json"], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("6.00", run.stdout)


if __name__ == "__main__":
    unittest.main()
