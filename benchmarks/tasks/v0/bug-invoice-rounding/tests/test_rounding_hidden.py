import unittest
from decimal import Decimal

from invoicing import Invoice, Line


def d(x):
    return Decimal(str(x))


class HiddenRoundingTest(unittest.TestCase):
    def test_half_up_on_exact_halves(self):
        self.assertEqual(d(Line("a", "2.675", 1).amount()), Decimal("2.68"))
        self.assertEqual(d(Line("b", "1.005", 1).amount()), Decimal("1.01"))
        self.assertEqual(d(Line("c", "0.125", 1).amount()), Decimal("0.13"))
        self.assertEqual(d(Line("d", "0.045", 1).amount()), Decimal("0.05"))

    def test_rounding_after_tax(self):
        self.assertEqual(d(Line("e", "1.00", 3, "0.075").amount()), Decimal("3.23"))  # 3.225
        self.assertEqual(d(Line("f", "19.99", 3, "0.2").amount()), Decimal("71.96"))  # 71.964

    def test_total_is_sum_of_rounded_lines(self):
        inv = Invoice("B-2", [Line("a", "0.125", 1), Line("b", "0.125", 1), Line("c", "10.10", 3, "0.1")])
        self.assertEqual(d(inv.total()), Decimal("33.59"))  # 0.13 + 0.13 + 33.33

    def test_many_lines_no_drift(self):
        inv = Invoice("C-3", [Line(str(i), "0.10", 1) for i in range(1000)])
        self.assertEqual(d(inv.total()), Decimal("100.00"))
        self.assertIn("$100.00", inv.render())


if __name__ == "__main__":
    unittest.main()
