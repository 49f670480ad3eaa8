"""Probes of real-natsort-presort: what the workspace's natsort answers (bench/verdict_runner.py).

Fail-to-pass (natsort 8.3.0): ns.PRESORT (alias ns.PS) makes the order of strings that represent the same
number ("a1", "a01") independent of the input order, in natsorted, humansorted, realsorted, index_natsorted and
its relatives, honouring reverse; os_sorted(presort=True) does the same; None and NaN get a fixed place among the
numbers (NaN, then None, then -inf, the value both stand for; under ns.NANLAST +inf, None, NaN). Pass-to-pass: the
algorithms, keys and helpers as natsort 8.2.0 answered them.
"""

import math
import sys


def _ns(ctx):
    root = ctx.path(".")
    if root not in sys.path:
        sys.path.append(root)  # after the standard library: the workspace shadows nothing
    return ctx.load("natsort")


SAME = ["a01", "a1", "a001", "a0001"]  # one number, four spellings
INF, NAN = float("inf"), float("nan")


def _show(values):
    """Non-finite floats as text (answers are plain JSON)."""
    return [repr(v) if isinstance(v, float) and not math.isfinite(v) else v for v in values]


def probe_presort_flag(ctx):
    ns = _ns(ctx).ns
    others = [m for m in ns.__members__ if m not in ("PRESORT", "PS")]
    return [ns.PS == ns.PRESORT, ns.PRESORT != 0, all(not (ns.PRESORT & ns[m]) for m in others if ns[m])]


def probe_presort_natsorted(ctx):
    n = _ns(ctx)
    return [n.natsorted(order, alg=n.ns.PRESORT) for order in (SAME, SAME[::-1], SAME[1:] + SAME[:1])]


def probe_presort_reverse(ctx):
    n = _ns(ctx)
    data = ["x2", "x02", "x10", "x1", "x01"]
    return [n.natsorted(d, alg=n.ns.PS, reverse=True) for d in (data, data[::-1])]


def probe_presort_with_other_flags(ctx):
    n = _ns(ctx)
    data = ["B1", "b01", "a1.0", "a1", "a01.00", "b1"]
    return [n.natsorted(d, alg=n.ns.PS | n.ns.IGNORECASE) for d in (data, data[::-1])] + \
        [n.natsorted(d, alg=n.ns.PS | n.ns.FLOAT) for d in (data, data[::-1])]


def probe_presort_realsorted_humansorted(ctx):
    n = _ns(ctx)
    data = ["v1.50", "v1.5", "v01.5", "v-1.5"]
    return [n.realsorted(d, alg=n.ns.PS) for d in (data, data[::-1])] + \
        [n.humansorted(d, alg=n.ns.PS) for d in (["a1", "a01"], ["a01", "a1"])]


def probe_presort_index(ctx):
    n = _ns(ctx)
    out = []
    for d in (SAME, SAME[::-1]):
        idx = n.index_natsorted(d, alg=n.ns.PRESORT)
        out.append([idx, n.order_by_index(d, idx)])
    out.append(n.index_natsorted(["b02", "b2", "a1"], alg=n.ns.PRESORT, reverse=True))
    out.append(n.index_realsorted(["1.0", "1", "01"], alg=n.ns.PRESORT))
    return out


def probe_presort_key_function(ctx):
    n = _ns(ctx)
    rows = [("a01", 1), ("a1", 2), ("a001", 3)]
    return [n.natsorted(r, key=lambda x: x[0], alg=n.ns.PRESORT) for r in (rows, rows[::-1])]


def probe_os_sorted_presort(ctx):
    n = _ns(ctx)
    files = ["img01.png", "img1.png", "img001.png", "img2.png"]
    return [n.os_sorted(f, presort=True) for f in (files, files[::-1])] + \
        [n.os_sorted(files, presort=True, reverse=True)]


def probe_none_nan_order(ctx):
    n = _ns(ctx)
    data = [3, None, NAN, -INF, 1.5, INF]
    return [_show(n.natsorted(d)) for d in (data, data[::-1])]


def probe_none_nan_order_nanlast(ctx):
    n = _ns(ctx)
    data = [3, None, NAN, INF, -INF, 0]
    return [_show(n.natsorted(d, alg=n.ns.NANLAST)) for d in (data, data[::-1])]


def probe_none_nan_reverse(ctx):
    n = _ns(ctx)
    data = [None, 2, NAN, -INF]
    return [_show(n.natsorted(data, reverse=True)), _show(n.natsorted(data[::-1], reverse=True, alg=n.ns.NL))]


def probe_nan_strings(ctx):
    n = _ns(ctx)
    data = ["a-inf", "anan", "a5", "a-5", "aNaN", "a+inf"]
    return [n.natsorted(data, alg=n.ns.FLOAT | n.ns.SIGNED), n.natsorted(data, alg=n.ns.FLOAT | n.ns.SIGNED | n.ns.NL)]


def probe_basic_natsorted(ctx):
    n = _ns(ctx)
    return [n.natsorted(["num10", "num2", "num1", "num20"]),
            n.natsorted(["a10", "A2", "a1", "B3"], alg=n.ns.IGNORECASE),
            n.natsorted(["1.5", "-3", "1.25e2", "0"], alg=n.ns.REAL),
            n.natsorted(["version1.10.2", "version1.9", "version1.10"])]


def probe_keys_and_helpers(ctx):
    n = _ns(ctx)
    key = n.natsort_keygen()
    return [list(key("a10b2")), list(n.natsort_keygen(alg=n.ns.REAL)("x-1.5y")), n.decoder("utf8")(b"abc"),
            n.as_ascii("num3"), n.as_utf8(b"\xc3\xa9") == "\u00e9", sorted(["b2", "b10"], key=key)]


def probe_path_sorting(ctx):
    n = _ns(ctx)
    paths = ["./folder/file (1).txt", "./folder/file.txt", "./folder (1)/file.txt", "./folder (10)/file.txt",
             "./folder (2)/file.txt"]
    return [n.natsorted(paths, alg=n.ns.PATH), n.os_sorted(paths)]


def probe_nested_and_bytes(ctx):
    n = _ns(ctx)
    return [n.natsorted([("a", "b10"), ("a", "b2"), ("a", "b1")]), n.natsorted([b"a10", b"a2"]),
            n.natsorted([2, 1.5, 10, "1", "b"], key=str)]


def probe_reverse_and_unsorted(ctx):
    n = _ns(ctx)
    return [n.natsorted(["a2", "a10", "a1"], reverse=True), n.index_humansorted(["b", "A", "a"]),
            n.realsorted(["a-5", "a7", "a+2"])]


def probe_version(ctx):
    return _ns(ctx).__version__.split(".")[0]
