"""Probes of bug-report-date-range: week membership, bounds and totals (bench/verdict_runner.py)."""

import datetime as dt

D = dt.datetime


def probe_in_week(ctx):
    in_week = ctx.load("reports.dates").in_week
    cases = [(D(2024, 3, 10, 10), dt.date(2024, 3, 4)), (D(2024, 3, 10, 23, 59, 59, 999999), dt.date(2024, 3, 6)),
             (D(2024, 3, 11), dt.date(2024, 3, 4)), (D(2024, 3, 4), dt.date(2024, 3, 10)),
             (D(2024, 3, 3, 23, 59), dt.date(2024, 3, 4))]
    return [bool(in_week(t, day)) for t, day in cases]


def probe_bounds(ctx):
    return ctx.load("reports.dates").week_bounds(dt.date(2024, 3, 7))


def probe_report_totals(ctx):
    weekly = ctx.load("reports.weekly")
    sales = [(D(2024, 3, 4, 9), 1250), (D(2024, 3, 9, 11), 2500), (D(2024, 3, 10, 10), 3100),
             (D(2024, 3, 10, 23, 59), 700), (D(2024, 3, 11), 5000)]
    return [weekly.weekly_total(sales, dt.date(2024, 3, 4)),
            weekly.daily_totals(sales, dt.date(2024, 3, 4))[dt.date(2024, 3, 10)]]
