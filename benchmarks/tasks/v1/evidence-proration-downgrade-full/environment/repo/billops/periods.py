"""Time helpers: the exports' ISO-8601 UTC stamps, epoch seconds, billing cycles of 30 days."""

from __future__ import annotations

import calendar
import time

from billops.plans import CYCLE_DAYS

DAY = 86400
CYCLE_S = CYCLE_DAYS * DAY
ISO = "%Y-%m-%dT%H:%M:%SZ"


def parse_iso(stamp: str) -> float:
    """Epoch seconds of an export stamp such as 2024-01-08T00:00:00Z."""
    return float(calendar.timegm(time.strptime(stamp, ISO)))


def iso(t: float) -> str:
    return time.strftime(ISO, time.gmtime(int(t)))


def day_of_week(t: float, week_start: float) -> int:
    """0 for the week's first day (the exports' dDAY)."""
    return int((t - week_start) // DAY)


def cycle_end(start: float) -> float:
    return start + CYCLE_S


def fraction_left(start: float, end: float, t: float) -> float:
    """The share of the cycle [start, end) still ahead at t, clamped to [0, 1]."""
    if end <= start:
        raise ValueError("empty cycle")
    return min(1.0, max(0.0, (end - t) / (end - start)))


def overlaps(a_start: float, a_end: float, b_start: float, b_end: float) -> bool:
    return a_start < b_end and b_start < a_end
