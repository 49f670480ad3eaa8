"""Probes of real-isodate-strict-parsing: what the workspace's isodate (src/ layout) answers (bench/verdict_runner.py).

Fail-to-pass (isodate 0.7.0): dates, times and date-times followed by other characters are refused with
ISO8601Error; fractional seconds beyond microseconds are cut off (never rounded up, so 23:59:59.9999995 parses);
parse_duration's second argument False always answers a Duration. Pass-to-pass: the forms 0.6.1 already parsed,
durations, arithmetic, formatting, time zones and pickling, as 0.6.1 answered them.
"""

DATE_FORMS = ["2012-01-31", "20120131", "2012-01", "2012", "19", "2012-W05-2", "2012W052", "2012-W05", "2012-031",
              "2012031", "+0012012-01-31"]
TIME_FORMS = ["12:30:15", "123015", "12:30", "1230", "12", "12:30:15.5", "12:30:15,25", "12:30:15Z", "12:30:15+02:00",
              "12:30:15-0530", "12:30.5", "12.25", "T12:30:15"]


def _iso(ctx):
    import sys
    src = ctx.path("src")
    if src not in sys.path:
        sys.path.append(src)  # after the standard library: the workspace shadows nothing
    return ctx.load("isodate")


def _v(x):
    """Plain data for a date, time, datetime, timedelta or Duration."""
    import datetime
    if type(x).__name__ == "Duration":
        return ["Duration", float(x.years), float(x.months), x.tdelta.days, x.tdelta.seconds, x.tdelta.microseconds]
    if isinstance(x, datetime.timedelta):
        return ["timedelta", x.days, x.seconds, x.microseconds]
    if isinstance(x, (datetime.date, datetime.time)):
        off = x.utcoffset() if not isinstance(x, datetime.date) or isinstance(x, datetime.datetime) else None
        return [type(x).__name__, x.isoformat(), None if off is None else off.total_seconds()]
    return [type(x).__name__, repr(x)]


def _try(ctx, fn, *args):
    iso = _iso(ctx)
    try:
        return _v(fn(*args))
    except iso.ISO8601Error:
        return "ISO8601Error"
    except Exception as e:  # noqa: BLE001 - which exception is the answer
        return "other:" + type(e).__name__


def probe_date_trailing_characters(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_date, s) for s in ["2012-01-01garbage", "20120101x", "2012-W01-1x", "2012-031 ",
                                                   "2012-01-01T", "2012-01-01 12:00", "2012-01-01\n"]]


def probe_time_trailing_characters(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_time, s) for s in ["1230x", "12:30:15 pm", "12:30:15Zjunk", "12:30:15+02:00x",
                                                   "12:30:15.5s", "12:30:15\n", "12:30:15Z\n"]]


def probe_datetime_trailing_characters(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_datetime, s) for s in ["2012-01-01T12:00:00Zjunk", "2012-01-01T12:00:00+02:00!",
                                                       "20120101T120000x", "2012-01-01T12:00:00.5 UTC"]]


def probe_dates_still_parse(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_date, s) for s in DATE_FORMS[:-1]] + [
        _try(ctx, iso.parse_date, DATE_FORMS[-1], 6)]


def probe_times_still_parse(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_time, s) for s in TIME_FORMS]


def probe_datetimes_still_parse(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_datetime, s) for s in ["2012-01-31T12:30:15", "20120131T123015Z",
                                                       "2012-W05-2T12:30+01:00", "2012-031T12:30:15.25-05:00"]]


def probe_fraction_cut_to_microseconds(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_time, s) for s in ["12:00:00.1234567", "12:00:00.9999999", "23:59:59.9999995",
                                                   "12:00:00,1234569", "120000.00000099"]]


def probe_fraction_cut_in_datetimes(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_datetime, s) for s in ["2012-01-01T12:00:00.1234567+02:00",
                                                       "2012-12-31T23:59:59.99999999Z"]]


def probe_short_fractions_unchanged(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_time, s) for s in ["12:00:00.5", "12:00:00,25", "12:00:00.123456", "12:00:00.000001"]]


def probe_duration_always_an_object(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_duration, s, False) for s in ["P1DT2H", "PT36H", "P2W", "PT0.5S", "-P3D"]]


def probe_duration_alternative_form_as_object(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_duration, "P0003-02-01T04:05:06", False),
            _try(ctx, iso.parse_duration, "P0001-00-01T04:05:06", False),
            _try(ctx, iso.parse_duration, "P0003-02-01T04:05:06")]


def probe_duration_default_unchanged(ctx):
    iso = _iso(ctx)
    return [_try(ctx, iso.parse_duration, s) for s in ["P1DT2H", "P1Y2M", "P2W", "PT1Hx", "P1Y2M3DT4H5M6.5S", "P",
                                                       "P1.5D"]] + [_try(ctx, iso.parse_duration, "P1DT2H", True)]


def probe_duration_arithmetic(ctx):
    import datetime
    iso = _iso(ctx)
    d = iso.parse_duration("P1M")
    y = iso.parse_duration("P1Y2M10DT2H30M")
    return [_v(datetime.date(2012, 1, 31) + d), _v(datetime.date(2012, 3, 31) - d), _v(y + y), _v(y - d),
            _v(datetime.datetime(2000, 2, 29, 12) + iso.Duration(years=1)), _v(d * 3), y == iso.Duration(
                10, 9000, years=1, months=2), str(y)]


def probe_formatting(ctx):
    import datetime
    iso = _iso(ctx)
    dt = datetime.datetime(2012, 1, 31, 12, 30, 15, 250000, tzinfo=iso.FixedOffset(2, 0, "+02:00"))
    return [iso.duration_isoformat(iso.parse_duration("P1Y2M3DT4H5M6S")),
            iso.duration_isoformat(datetime.timedelta(days=3, seconds=61)),
            iso.date_isoformat(datetime.date(2012, 1, 31), iso.DATE_EXT_WEEK_COMPLETE),
            iso.date_isoformat(datetime.date(2012, 1, 31), iso.DATE_BAS_ORD_COMPLETE),
            iso.datetime_isoformat(dt), iso.time_isoformat(dt.timetz(), iso.TIME_EXT_COMPLETE + iso.TZ_EXT),
            iso.strftime(datetime.date(2012, 1, 31), "%Y week %V day %u")]


def probe_time_zones(ctx):
    iso = _iso(ctx)
    out = []
    for s in ["Z", "+02:00", "-0530", "+01"]:
        tz = iso.parse_tzinfo(s)
        out.append([s, tz.utcoffset(None).total_seconds(), tz.tzname(None)])
    return out + [_try(ctx, iso.parse_tzinfo, "+2")]


def probe_pickle_round_trip(ctx):
    import pickle
    iso = _iso(ctx)
    y = iso.parse_duration("P1Y2M10DT2H")
    dt = iso.parse_datetime("2012-01-31T12:30:15+02:00")
    return [_v(pickle.loads(pickle.dumps(y))), _v(pickle.loads(pickle.dumps(dt)))]
