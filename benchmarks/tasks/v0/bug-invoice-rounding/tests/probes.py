"""Probes of bug-invoice-rounding: line amounts and totals as exact decimal text (bench/verdict_runner.py)."""

from decimal import Decimal


def _d(x):
    """The amount's exact value as plain text (2.68, 100): equal numbers give equal text whatever the type."""
    return format(Decimal(str(x)).normalize(), "f")


def probe_half_up_on_exact_halves(ctx):
    Line = ctx.load("invoicing").Line
    return [_d(Line(n, p, 1).amount()) for n, p in (("a", "2.675"), ("b", "1.005"), ("c", "0.125"), ("d", "0.045"))]


def probe_rounding_after_tax(ctx):
    Line = ctx.load("invoicing").Line
    return [_d(Line("e", "1.00", 3, "0.075").amount()), _d(Line("f", "19.99", 3, "0.2").amount())]


def probe_total_is_sum_of_rounded_lines(ctx):
    m = ctx.load("invoicing")
    inv = m.Invoice("B-2", [m.Line("a", "0.125", 1), m.Line("b", "0.125", 1), m.Line("c", "10.10", 3, "0.1")])
    return _d(inv.total())


def probe_many_lines_no_drift(ctx):
    m = ctx.load("invoicing")
    inv = m.Invoice("C-3", [m.Line(str(i), "0.10", 1) for i in range(1000)])
    return [_d(inv.total()), "$100.00" in inv.render()]
