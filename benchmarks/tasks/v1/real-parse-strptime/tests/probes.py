"""Probes of real-parse-strptime: what the workspace's parse module answers (bench/verdict_runner.py).

Fail-to-pass (parse 1.20.0, "Added support for strptime codes"): a field whose format holds 1989 C date/time codes
(%Y, %m, %d, %H, %M, %S, %f, %z, %a, %A, %b, %B, %y, %I, %p, %j) matches text in that shape and converts it with
strptime: a date when only date codes are given, a time when only time codes, a datetime when both; the current
year when none is given; in parse, search, findall and compiled patterns, named or not. Pass-to-pass: the other
format types ({:%} percentages, {:ti}, {:tg}, numbers, alignment, custom types) as 1.19.1 answered them.
"""


def _p(ctx):
    return ctx.load("parse")


def _v(x):
    """Plain data for a value parse answers (dates and times by type name and isoformat)."""
    import datetime
    if isinstance(x, (datetime.date, datetime.time)):
        return [type(x).__name__, x.isoformat()]
    if isinstance(x, (list, tuple)):
        return [_v(y) for y in x]
    if isinstance(x, dict):
        return {k: _v(v) for k, v in x.items()}
    return x


def _fields(r):
    """A result as [fixed fields, named fields], or None when nothing matched."""
    return None if r is None else [_v(list(r.fixed)), _v(dict(r.named))]


def probe_date_codes_give_a_date(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:%Y-%m-%d}", "2023-11-23")), _fields(p.parse("{:%Y/%m/%d}", "2023/11/25")),
            _fields(p.parse("{:%d.%m.%Y}", "5.1.2024"))]


def probe_date_and_time_codes_give_a_datetime(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:%Y-%m-%d %H:%M:%S}", "2023-11-23 12:56:47")),
            _fields(p.parse("{:%Y%m%d%H%M}", "202311231256")),
            _fields(p.parse("at {:%Y-%m-%dT%H:%M}", "at 2024-02-29T07:05"))]


def probe_time_codes_give_a_time(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:%H:%M}", "12:56")), _fields(p.parse("{:%H:%M:%S.%f}", "09:05:03.123456")),
            _fields(p.parse("{:%I:%M %p}", "07:30 PM"))]


def probe_names_of_days_and_months(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:%A %d %B %Y}", "Thursday 23 November 2023")),
            _fields(p.parse("{:%a, %d %b %y}", "Sat, 02 Mar 24"))]


def probe_time_zone_offset(ctx):
    p = _p(ctx)
    r = p.parse("{:%Y-%m-%d %H:%M:%S %z}", "2023-11-23 12:56:47 +0200")
    s = p.parse("{:%Y-%m-%dT%H:%M%z}", "2023-11-23T12:56-05:30")
    return [_fields(r), _fields(s)]


def probe_day_of_year(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:%Y-%j}", "2024-060")), _fields(p.parse("{:%Y day %j}", "2023 day 1"))]


def probe_year_left_out(ctx):
    import datetime
    p = _p(ctx)
    r = p.parse("{:%m/%d}", "11/23")
    d = r[0] if r is not None else None
    return [type(d).__name__, [d.month, d.day, d.year == datetime.date.today().year] if d is not None else None]


def probe_named_fields(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{when:%Y-%m-%d} {what}", "2023-11-23 deploy")),
            _fields(p.parse("{start:%H:%M}-{end:%H:%M}", "09:00-17:30"))]


def probe_search_and_findall(ctx):
    p = _p(ctx)
    text = "released on 5/11/2023 and patched on 12/11/2023, retired 01/02/2024."
    found = p.findall("on {:%d/%m/%Y}", text)
    return [_fields(p.search("retired {:%d/%m/%Y}.", text)), [_v(list(r.fixed)) for r in found]]


def probe_compiled_pattern(ctx):
    p = _p(ctx)
    pat = p.compile("{:%Y-%m-%d} {:%H:%M} {:d}")
    return [_fields(pat.parse("2023-11-23 12:56 42")), _fields(pat.parse("2024-01-02 00:01 7")),
            _fields(pat.parse("2024-01-02 noon 7"))]


def probe_shape_must_match(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:%Y-%m-%d}", "23-11-2023")), _fields(p.parse("{:%H:%M}", "noon")),
            _fields(p.parse("{:%Y-%m-%d}", "2023-11-23 extra"))]


def probe_percentages_unchanged(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:%}", "50%")), _fields(p.parse("{:%} done", "12.5% done")),
            _fields(p.parse("{rate:%}", "7%"))]


def probe_builtin_date_types_unchanged(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:ti}", "2023-11-23T12:56:47")), _fields(p.parse("{:tg}", "23/11/2023 12:56")),
            _fields(p.parse("{:te}", "Thu, 23 Nov 2023 12:56:47 +0000")), _fields(p.parse("{:th}",
                                                                                        "23/Nov/2023:12:56:47 +0000"))]


def probe_numbers_and_alignment_unchanged(ctx):
    p = _p(ctx)
    return [_fields(p.parse("{:d} {:f} {:x}", "-12 3.5 ff")), _fields(p.parse("[{:>5}]", "[  abc]")),
            _fields(p.parse("{:+d}", "+7")), _fields(p.parse("{:n}", "1,234")), _fields(p.parse("{:03d}", "007")), _fields(p.parse("{:.2f}", "3.14"))]


def probe_custom_types_unchanged(ctx):
    p = _p(ctx)

    @p.with_pattern(r"\d+")
    def number(text):
        return int(text) * 2

    return [_fields(p.parse("{:Double} and {:w}", "21 and hi", extra_types={"Double": number})),
            _fields(p.parse("{} {}", "a b")), _fields(p.parse("{0} {0}", "x x"))]
