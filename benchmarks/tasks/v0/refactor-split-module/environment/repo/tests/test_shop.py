import unittest
from decimal import Decimal

from shop import CATALOG, Cart, CartError, apply_discount, find_product, format_price, total_with_tax


class ShopTest(unittest.TestCase):
    def test_pricing(self):
        self.assertEqual(apply_discount(Decimal("10.00"), 15), Decimal("8.50"))
        self.assertEqual(total_with_tax(CATALOG["PEN"], 3), Decimal("4.32"))
        self.assertEqual(format_price(Decimal("1234.5")), "£1,234.50")

    def test_cart(self):
        cart = Cart().add("pen", 2).add("BOOK").add("milk")
        self.assertEqual(cart.total(), Decimal("2.88") + Decimal("4.73") + Decimal("0.99"))
        self.assertIn("TOTAL £8.60", cart.receipt())
        with self.assertRaises(CartError):
            cart.remove("nothing")
        with self.assertRaises(KeyError):
            find_product("nope")


if __name__ == "__main__":
    unittest.main()
