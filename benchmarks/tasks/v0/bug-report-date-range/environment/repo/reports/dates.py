"""Week arithmetic."""

import datetime as dt


def week_start(day):
    """Monday 00:00 of the week containing `day` (a date or datetime)."""
    if isinstance(day, dt.datetime):
        day = day.date()
    monday = day - dt.timedelta(days=day.weekday())
    return dt.datetime.combine(monday, dt.time())


def week_bounds(day):
    """(start, end) of the week containing `day`; a timestamp t is in the week when start <= t < end."""
    start = week_start(day)
    return start, start + dt.timedelta(days=6)


def in_week(ts, day):
    start, end = week_bounds(day)
    return start <= ts < end
