"""Probes of written-boltons-size-parser: the byte counts boltons.strutils.human2bytes gives (bench/verdict_runner.py).
Fail-to-pass: rounding to the nearest byte (halves to even) and exactness for large units. Pass-to-pass: units,
spacing, signs, errors, and bytes2human, as the shipped commit already did them."""

import random


def _h(ctx):
    return ctx.load("boltons.strutils").human2bytes


def _many(ctx, texts):
    h = _h(ctx)
    out = []
    for t in texts:
        try:
            out.append(h(t))
        except ValueError:
            out.append("ValueError")
    return out


def probe_rounds_to_nearest(ctx):
    return _many(ctx, ["0.7K", "1.3K", "0.9kB", "2.0001M", "1.999 MiB", "0.33K"])


def probe_negative_sizes_round(ctx):
    return _many(ctx, ["-0.7K", "-1.3 KiB", "-2.5B", "-0.5kB"])


def probe_halves_to_even(ctx):
    return _many(ctx, ["0.5B", "1.5B", "2.5B", "3.5B", "0.0005kB", "0.0015kB"])


def probe_large_units_exact(ctx):
    return _many(ctx, ["1.1Y", "8.2 EiB", "0.3 ZB", "123.456 PB", "7.77777T", "1.000000000000001 YiB"])


def probe_large_integers_exact(ctx):
    return _many(ctx, ["9007199254740993B", "9007199254740993 K", "99999999999999999999 YB"])


def probe_decimal_point_forms(ctx):
    return _many(ctx, ["1.K", ".5K", "+.25 MiB", "3.0", "0.1G"])


def probe_whole_units_unchanged(ctx):
    return _many(ctx, ["126K", "1.5 MiB", "10kB", "512", " 2 g ", "1b", "3 MB", "4mib", "1T", "2 TiB", "1Y"])


def probe_errors_unchanged(ctx):
    h = _h(ctx)
    return [ctx.message(ValueError, h, t) for t in ("ten K", "10 parsecs", "", "1e3K", "1,5K", "K")]


def probe_round_trip_bytes2human(ctx):
    s = ctx.load("boltons.strutils")
    return [s.human2bytes(s.bytes2human(n, d)) for n in (0, 1, 1023, 128991, 100001221, 5 * 1024 ** 4, 987654321987)
            for d in (0, 1, 3)]


def probe_bytes2human_unchanged(ctx):
    b = ctx.load("boltons.strutils").bytes2human
    return [b(128991), b(100001221), b(0, 2), b(1024), b(-2048, 1), b(10 ** 20, 2)]


def probe_random_sizes(ctx):
    rng = random.Random(5)
    units = ["", "B", "K", "kB", "KiB", "M", "MB", "MiB", "G", "GB", "T", "TiB", "P", "PB", "E", "EiB", "Z", "Y", "YB"]
    texts = ["%s%d.%0*d %s" % (rng.choice(["", "-", "+"]), rng.randint(0, 999), rng.randint(1, 6),
                               rng.randint(0, 999999) % 10 ** 6, rng.choice(units)) for _ in range(400)]
    return _many(ctx, texts)


def probe_exported(ctx):
    s = ctx.load("boltons.strutils")
    return ["human2bytes" in s.__all__, "bytes2human" in s.__all__]
