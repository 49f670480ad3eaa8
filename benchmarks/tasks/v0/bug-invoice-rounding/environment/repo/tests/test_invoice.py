import unittest

from invoicing import Invoice, Line


class InvoiceTest(unittest.TestCase):
    def test_simple_total(self):
        inv = Invoice("A-1", [Line("pen", "1.50", 2), Line("pad", "3.00", 1)])
        self.assertEqual(float(inv.total()), 6.00)

    def test_render(self):
        self.assertIn("$6.00", Invoice("A-1", [Line("pen", "1.50", 2), Line("pad", "3.00")]).render())


if __name__ == "__main__":
    unittest.main()
