"""Renewals due: the accounts whose cycle ends in a window, with the plan they will renew at (for cash forecasts)."""

from __future__ import annotations

from billops import plans
from billops.events import SUBSCRIPTION_TYPES, read_events
from billops.periods import parse_iso


def state(log_dir: str) -> dict[str, dict]:
    """{account: {"plan", "seats", "region", "period_end", "scheduled"}} at the end of the week; `scheduled` is the
    plan of a change pending for the period's end (None when there is none)."""
    out: dict[str, dict] = {}
    for e in read_events(log_dir, SUBSCRIPTION_TYPES):
        s = out.setdefault(e["account"], {"scheduled": None})
        s.update(region=e["region"], seats=e["seats"], period_end=parse_iso(e["period_end"]))
        if e["type"] == "subscription.updated" and e.get("effective") == "period_end":
            s["scheduled"] = e["plan"]
            s.setdefault("plan", e.get("previous_plan") or e["plan"])
        else:
            s["plan"] = e["plan"]
            if e["type"] == "subscription.renewed":
                s["scheduled"] = None
    return out


def due(log_dir: str, start: float, end: float) -> list[dict]:
    """Renewals falling in [start, end): account, at, plan, cents (seats included), sorted by time."""
    rows = []
    for account, s in state(log_dir).items():
        if start <= s["period_end"] < end:
            plan = s["scheduled"] or s["plan"]
            cents = plans.price(plan) + max(0, s["seats"] - 1) * plans.SEAT_CENTS
            rows.append({"account": account, "at": s["period_end"], "plan": plan, "cents": cents,
                         "region": s["region"]})
    return sorted(rows, key=lambda r: (r["at"], r["account"]))


def forecast(log_dir: str, start: float, end: float) -> dict[str, int]:
    """{region: cents} of the renewals due in [start, end), before VAT."""
    out: dict[str, int] = {}
    for r in due(log_dir, start, end):
        out[r["region"]] = out.get(r["region"], 0) + r["cents"]
    return out
