"""Invoice lines."""

from invoicing.tax import with_tax


class Line:
    def __init__(self, description, unit_price, quantity=1, tax_rate="0"):
        self.description = description
        self.unit_price = unit_price
        self.quantity = int(quantity)
        self.tax_rate = tax_rate

    def amount(self):
        """The line amount in currency units, rounded to cents (see README)."""
        gross = with_tax(float(self.unit_price) * self.quantity, self.tax_rate)
        return round(gross, 2)
