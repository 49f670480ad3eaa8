"""Support's proration calculator: what a plan or seat change mid-cycle should cost (quotes for customers).

The billing service computes the same amounts server-side (docs/billing.md); this module only quotes them.
"""

from __future__ import annotations

import dataclasses

from billops import plans
from billops.periods import DAY, fraction_left

CORRECTION_WINDOW_S = DAY  # a plan change this soon after a renewal re-issues the renewal (docs/billing.md)


def prorate(cents: int, start: float, end: float, t: float) -> int:
    """The part of a cycle's price for the time left from t to end, rounded half up to the cent."""
    return int(cents * fraction_left(start, end, t) + 0.5)


@dataclasses.dataclass(frozen=True)
class Quote:
    """What a change costs: charged on the invoice, credited on the invoice, credited to the balance."""

    charge: int
    invoice_credit: int = 0
    balance_credit: int = 0
    full_cycle: bool = False  # a correction: the renewal re-issued for the whole cycle

    @property
    def net(self) -> int:
        return self.charge - self.invoice_credit - self.balance_credit


def plan_change(previous: str, plan: str, start: float, end: float, t: float, effective: str = "now") -> Quote:
    """The quote for moving from previous to plan at t in the cycle [start, end).

    At the period's end nothing is billed now (the renewal bills the new plan). Within the correction window the
    renewal is re-issued at the new plan for the full cycle. Otherwise the new plan is charged for the rest of
    the cycle and the unused part of the old plan credited: on the invoice when it does not exceed the charge
    (upgrades), else to the account's balance by a credit note (downgrades).
    """
    if effective == "period_end":
        return Quote(charge=0)
    if t - start < CORRECTION_WINDOW_S:
        return Quote(charge=plans.price(plan), full_cycle=True)
    charge = prorate(plans.price(plan), start, end, t)
    credit = prorate(plans.price(previous), start, end, t)
    if credit <= charge:
        return Quote(charge=charge, invoice_credit=credit)
    return Quote(charge=charge, balance_credit=credit)


def seats_change(old: int, new: int, start: float, end: float, t: float) -> Quote:
    """Extra seats are charged for the rest of the cycle; removed seats are not refunded."""
    if new <= old:
        return Quote(charge=0)
    return Quote(charge=prorate(plans.SEAT_CENTS * (new - old), start, end, t))
