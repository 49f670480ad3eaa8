import unittest

from geometry.area import calc
from geometry.report import table
from geometry.shapes import rectangle, total_area, triangle


class AreaTest(unittest.TestCase):
    def test_shapes(self):
        self.assertEqual(calc(rectangle(3, 4)), 12)
        self.assertEqual(calc(triangle(4, 3)), 6)
        self.assertEqual(calc([(0, 0), (1, 1)]), 0.0)

    def test_total_and_table(self):
        self.assertEqual(total_area([rectangle(1, 1), triangle(2, 2)]), 3)
        self.assertIn("12.00", table({"r": rectangle(3, 4)}))


if __name__ == "__main__":
    unittest.main()
