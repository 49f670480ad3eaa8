"""Probes of refactor-split-module: the package layout, fresh imports and the public API (bench/verdict_runner.py)."""

import os
import sys
from decimal import Decimal

PUBLIC = ["Product", "CATALOG", "find_product", "apply_discount", "tax_for", "total_with_tax", "format_price",
          "Cart", "CartError"]
HOMES = {"Cart": "cart", "CartError": "cart", "Product": "catalog", "find_product": "catalog", "CATALOG": "catalog",
         "apply_discount": "pricing", "format_price": "pricing", "tax_for": "pricing", "total_with_tax": "pricing"}


def _fresh(ctx, code):
    return ctx.run([sys.executable, "-c", code])


def probe_layout(ctx):
    return [os.path.exists(ctx.path("shop.py"))] + [os.path.isfile(ctx.path("shop", f"{m}.py"))
                                                    for m in ("catalog", "pricing", "cart")]


def probe_each_module_imports_alone(ctx):
    return [_fresh(ctx, f"import {m}")["returncode"] for m in ("shop.catalog", "shop.pricing", "shop.cart", "shop")]


def probe_names_live_in_their_modules(ctx):
    code = ("import json, shop, shop.cart, shop.catalog, shop.pricing\n"
            f"print(json.dumps({{n: getattr(shop, n) is getattr(getattr(shop, m), n) for n, m in {HOMES!r}.items()}}))")
    r = _fresh(ctx, code)
    return [r["returncode"], r["stdout"].strip()]


def probe_public_api(ctx):
    shop = ctx.load("shop")
    cart = shop.Cart().add("pen", 2).add("book", 3).set_discount(10)
    total = cart.total()
    return [[hasattr(shop, n) for n in PUBLIC], format(total.normalize(), "f") if isinstance(total, Decimal) else None,
            shop.format_price(Decimal("0.5")), ctx.raises(ValueError, shop.apply_discount, 1, 101)]


def probe_visible_tests_pass(ctx):
    return ctx.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."])["returncode"] == 0
