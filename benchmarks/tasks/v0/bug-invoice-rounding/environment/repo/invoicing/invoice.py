"""Invoices."""

from invoicing.format import money


class Invoice:
    def __init__(self, number, lines=()):
        self.number = number
        self.lines = list(lines)

    def add(self, line):
        self.lines.append(line)
        return self

    def total(self):
        """Sum of the rounded line amounts."""
        return sum(line.amount() for line in self.lines)

    def render(self):
        out = [f"Invoice {self.number}"]
        out += [f"  {line.description:<20} {money(line.amount()):>10}" for line in self.lines]
        out.append(f"  {'TOTAL':<20} {money(self.total()):>10}")
        return "\n".join(out)
