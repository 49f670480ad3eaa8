import os
import subprocess
import sys
import unittest
from decimal import Decimal

PUBLIC = ["Product", "CATALOG", "find_product", "apply_discount", "tax_for", "total_with_tax", "format_price",
          "Cart", "CartError"]


def fresh(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


class HiddenSplitTest(unittest.TestCase):
    def test_layout(self):
        self.assertFalse(os.path.exists("shop.py"))
        for mod in ("catalog", "pricing", "cart"):
            self.assertTrue(os.path.isfile(f"shop/{mod}.py"), mod)

    def test_each_module_imports_alone(self):
        for mod in ("shop.catalog", "shop.pricing", "shop.cart", "shop"):
            run = fresh(f"import {mod}")
            self.assertEqual(run.returncode, 0, run.stderr)

    def test_names_live_in_their_modules(self):
        run = fresh("import shop, shop.cart, shop.catalog, shop.pricing\n"
                    "assert shop.Cart is shop.cart.Cart and shop.CartError is shop.cart.CartError\n"
                    "assert shop.Product is shop.catalog.Product and shop.find_product is shop.catalog.find_product\n"
                    "assert shop.CATALOG is shop.catalog.CATALOG\n"
                    "assert shop.apply_discount is shop.pricing.apply_discount\n"
                    "assert shop.format_price is shop.pricing.format_price and shop.tax_for is shop.pricing.tax_for\n"
                    "assert shop.total_with_tax is shop.pricing.total_with_tax\n")
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_public_api(self):
        import shop
        for name in PUBLIC:
            self.assertTrue(hasattr(shop, name), name)
        cart = shop.Cart().add("pen", 2).add("book", 3).set_discount(10)
        self.assertEqual(cart.total(), Decimal("2.59") + Decimal("12.76"))
        self.assertEqual(shop.format_price(Decimal("0.5")), "£0.50")
        with self.assertRaises(ValueError):
            shop.apply_discount(1, 101)

    def test_visible_tests_pass(self):
        run = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()
