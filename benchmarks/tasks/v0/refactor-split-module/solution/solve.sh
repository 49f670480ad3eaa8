#!/usr/bin/env bash
set -euo pipefail
mkdir -p shop
cat > shop/catalog.py <<'PY'
"""Products and the catalogue."""

import dataclasses
from decimal import Decimal


@dataclasses.dataclass(frozen=True)
class Product:
    sku: str
    name: str
    price: Decimal
    tax_class: str = "standard"


CATALOG = {
    "PEN": Product("PEN", "Ballpoint pen", Decimal("1.20")),
    "BOOK": Product("BOOK", "Notebook", Decimal("4.50"), "reduced"),
    "MILK": Product("MILK", "Milk 1l", Decimal("0.99"), "zero"),
}


def find_product(sku):
    try:
        return CATALOG[sku.upper()]
    except KeyError:
        raise KeyError(f"unknown sku {sku!r}") from None
PY
cat > shop/pricing.py <<'PY'
"""Discounts, tax and price formatting."""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
TAX_RATES = {"standard": Decimal("0.20"), "reduced": Decimal("0.05"), "zero": Decimal("0")}


def apply_discount(amount, percent):
    """amount reduced by percent (0-100), rounded half up to cents."""
    if not 0 <= percent <= 100:
        raise ValueError(f"discount {percent} is not in 0..100")
    return (Decimal(amount) * (100 - Decimal(percent)) / 100).quantize(CENT, ROUND_HALF_UP)


def tax_for(product, net):
    return (Decimal(net) * TAX_RATES[product.tax_class]).quantize(CENT, ROUND_HALF_UP)


def total_with_tax(product, quantity, discount=0):
    net = apply_discount(product.price * quantity, discount)
    return net + tax_for(product, net)


def format_price(amount):
    return f"£{Decimal(amount).quantize(CENT, ROUND_HALF_UP):,}"
PY
cat > shop/cart.py <<'PY'
"""Shopping carts."""

from decimal import Decimal

from shop.catalog import find_product
from shop.pricing import apply_discount, format_price, total_with_tax


class CartError(Exception):
    pass


class Cart:
    def __init__(self):
        self.lines = {}
        self.discount = 0

    def add(self, sku, quantity=1):
        if quantity <= 0:
            raise CartError(f"quantity must be positive, got {quantity}")
        product = find_product(sku)
        self.lines[product.sku] = self.lines.get(product.sku, 0) + quantity
        return self

    def remove(self, sku):
        if sku.upper() not in self.lines:
            raise CartError(f"{sku!r} is not in the cart")
        del self.lines[sku.upper()]
        return self

    def set_discount(self, percent):
        apply_discount(0, percent)  # validates
        self.discount = percent
        return self

    def total(self):
        return sum((total_with_tax(find_product(s), q, self.discount) for s, q in self.lines.items()), Decimal(0))

    def receipt(self):
        lines = [f"{q} x {find_product(s).name}" for s, q in sorted(self.lines.items())]
        return "\n".join(lines + [f"TOTAL {format_price(self.total())}"])
PY
cat > shop/__init__.py <<'PY'
"""A small shop: products, pricing rules and carts."""

from shop.cart import Cart, CartError
from shop.catalog import CATALOG, Product, find_product
from shop.pricing import CENT, TAX_RATES, apply_discount, format_price, tax_for, total_with_tax

__all__ = ["Product", "CATALOG", "find_product", "apply_discount", "tax_for", "total_with_tax", "format_price",
           "Cart", "CartError"]
PY
rm shop.py
