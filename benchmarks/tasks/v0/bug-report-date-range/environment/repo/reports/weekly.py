"""The weekly report."""

import csv
import datetime as dt

from reports.dates import in_week


def load_sales(path):
    """[(timestamp, amount_cents)] from a CSV with columns ts (ISO 8601), amount_cents."""
    with open(path, newline="") as f:
        return [(dt.datetime.fromisoformat(r["ts"]), int(r["amount_cents"])) for r in csv.DictReader(f)]


def weekly_total(sales, day):
    """Revenue in cents of the week containing `day`."""
    return sum(amount for ts, amount in sales if in_week(ts, day))


def daily_totals(sales, day):
    """{date: cents} for each day of the week with sales."""
    out = {}
    for ts, amount in sales:
        if in_week(ts, day):
            out[ts.date()] = out.get(ts.date(), 0) + amount
    return out
