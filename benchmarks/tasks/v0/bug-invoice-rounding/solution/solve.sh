#!/usr/bin/env bash
# Exact decimal arithmetic with one ROUND_HALF_UP per line.
set -euo pipefail
cat > invoicing/tax.py <<'PY'
"""Tax helpers."""

from decimal import Decimal


def with_tax(net, rate):
    """net × (1 + rate), exactly."""
    return Decimal(net) * (1 + Decimal(str(rate)))
PY
cat > invoicing/line.py <<'PY'
"""Invoice lines."""

from decimal import ROUND_HALF_UP, Decimal

from invoicing.tax import with_tax

CENT = Decimal("0.01")


class Line:
    def __init__(self, description, unit_price, quantity=1, tax_rate="0"):
        self.description = description
        self.unit_price = unit_price
        self.quantity = int(quantity)
        self.tax_rate = tax_rate

    def amount(self):
        """The line amount in currency units, rounded half up to cents once, after tax (see README)."""
        gross = with_tax(Decimal(str(self.unit_price)) * self.quantity, self.tax_rate)
        return gross.quantize(CENT, rounding=ROUND_HALF_UP)
PY
python3 - <<'PY'
import re
p = "invoicing/invoice.py"
s = open(p).read()
s = s.replace("return sum(line.amount() for line in self.lines)",
              "return sum((line.amount() for line in self.lines), Decimal(0))")
s = s.replace('from invoicing.format import money', 'from decimal import Decimal\n\nfrom invoicing.format import money')
open(p, "w").write(s)
PY
