"""The plan catalogue: prices per 30-day cycle in cents (the same in every region; EUR and USD are priced alike),
seat and add-on prices. Plans are ordered from the cheapest; a change to a cheaper plan is a downgrade."""

from __future__ import annotations

PLAN_CENTS = {"starter": 1500, "team": 4900, "business": 12900, "scale": 29900}
PLAN_ORDER = ("starter", "team", "business", "scale")
SEAT_CENTS = 900  # per extra seat and cycle
ADDON_CENTS = {"extra-storage": 2500, "priority-support": 9900, "audit-log": 4900, "sso": 7900}  # one-off
CYCLE_DAYS = 30


class UnknownPlan(KeyError):
    """A plan name the catalogue does not hold."""


def price(plan: str) -> int:
    """The plan's price per cycle, in cents."""
    try:
        return PLAN_CENTS[plan]
    except KeyError:
        raise UnknownPlan(plan) from None


def rank(plan: str) -> int:
    """0 for the cheapest plan, rising with the price."""
    price(plan)
    return PLAN_ORDER.index(plan)


def is_downgrade(previous: str | None, plan: str) -> bool:
    """Whether moving from previous to plan lowers the price (False when there was no previous plan)."""
    return previous is not None and price(plan) < price(previous)


def is_upgrade(previous: str | None, plan: str) -> bool:
    return previous is not None and price(plan) > price(previous)


def addon_price(name: str) -> int:
    try:
        return ADDON_CENTS[name]
    except KeyError:
        raise UnknownPlan(name) from None
