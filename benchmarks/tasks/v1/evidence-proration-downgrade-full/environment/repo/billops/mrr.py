"""Monthly recurring revenue from the week's events: per region and plan, and the week's movements."""

from __future__ import annotations

from billops import plans
from billops.events import SUBSCRIPTION_TYPES, read_events


def mrr(log_dir: str) -> dict[str, dict[str, int]]:
    """{region: {plan: cents}} of the plans accounts hold at the end of the week (seats included)."""
    last = {}
    for e in read_events(log_dir, SUBSCRIPTION_TYPES):
        last[e["account"]] = e
    out: dict[str, dict[str, int]] = {}
    for e in last.values():
        per = out.setdefault(e["region"], {})
        extra = max(0, e["seats"] - 1) * plans.SEAT_CENTS
        per[e["plan"]] = per.get(e["plan"], 0) + plans.price(e["plan"]) + extra
    return out


def movements(log_dir: str) -> dict[str, int]:
    """Counts of the week's plan movements: upgrades, downgrades now, downgrades at the period's end."""
    out = {"upgrades": 0, "downgrades_now": 0, "downgrades_period_end": 0}
    for e in read_events(log_dir, ("subscription.updated",)):
        prev = e.get("previous_plan")
        if plans.is_upgrade(prev, e["plan"]):
            out["upgrades"] += 1
        elif plans.is_downgrade(prev, e["plan"]):
            out["downgrades_now" if e.get("effective") == "now" else "downgrades_period_end"] += 1
    return out
