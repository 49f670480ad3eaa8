"""Probes of written-natsort-unique: what the workspace's natsort answers (bench/verdict_runner.py).

Fail-to-pass: natsort_unique keeps the first of the entries that sort as equal, as given (its spelling, its
place), with or without IGNORECASE, FLOAT, PATH or a key; `natsort --unique` prints those first entries sorted.
Pass-to-pass: inputs without differently spelled duplicates, the rest of the command line and of the sorting API
as natsort 8.4.0 answered them.
"""

import contextlib
import io
import sys


def _ns(ctx):
    root = ctx.path(".")
    if root not in sys.path:
        sys.path.append(root)  # after the standard library: the workspace shadows nothing
    return ctx.load("natsort")


def _cli(ctx, *args):
    _ns(ctx)
    main = ctx.load("natsort.__main__")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main.main(*args)
    return out.getvalue().splitlines()


def probe_unique_zero_padding(ctx):
    n = _ns(ctx)
    return [n.natsort_unique(["a1", "a01", "b2", "a001"]), n.natsort_unique(["a01", "a1", "b2", "a001"])]


def probe_unique_ignorecase(ctx):
    n = _ns(ctx)
    given = ["img1.jpg", "IMG1.jpg", "img2.jpg", "Img2.JPG"]
    return [n.natsort_unique(given, alg=n.ns.IGNORECASE), n.natsort_unique(given[::-1], alg=n.ns.IGNORECASE),
            n.natsort_unique(given)]


def probe_unique_keeps_input_order(ctx):
    n = _ns(ctx)
    return n.natsort_unique(["z9", "b", "a10", "B", "a010", "z09"], alg=n.ns.IGNORECASE)


def probe_unique_float(ctx):
    n = _ns(ctx)
    return [n.natsort_unique(["x1.50", "x1.5", "x2", "x01.5"], alg=n.ns.FLOAT),
            n.natsort_unique(["x1.50", "x1.5", "x2"])]


def probe_unique_key(ctx):
    n = _ns(ctx)
    rows = [("v01", 1), ("v1", 2), ("v2", 3), ("V2", 4)]
    return [n.natsort_unique(rows, key=lambda r: r[0]),
            n.natsort_unique(rows, key=lambda r: r[0], alg=n.ns.IGNORECASE)]


def probe_unique_objects_kept_as_given(ctx):
    n = _ns(ctx)

    class Tag(str):
        pass

    first, second = Tag("r01"), Tag("r1")
    out = n.natsort_unique([first, second, Tag("r2")])
    return [len(out), out[0] is first, out[1] == "r2"]


def probe_unique_paths(ctx):
    n = _ns(ctx)
    given = ["./data/run02.csv", "./data/run2.csv", "./data/run10.csv", "./Data/run2.csv"]
    return [n.natsort_unique(given, alg=n.ns.PATH), n.natsort_unique(given, alg=n.ns.PATH | n.ns.IGNORECASE)]


def probe_unique_without_duplicates(ctx):
    n = _ns(ctx)
    return [n.natsort_unique(["c", "a10", "a9"]), n.natsort_unique([]), n.natsort_unique(iter(["q3", "q3", "q4"])),
            n.natsort_unique(["a2", "a10", "a2", "a1"])]


def probe_cli_unique(ctx):
    return [_cli(ctx, "--unique", "n10", "n2", "n010", "n02"), _cli(ctx, "-u", "-r", "f1.0", "f1", "f2")]


def probe_cli_unique_float(ctx):
    return _cli(ctx, "-u", "-t", "float", "v1.50", "v1.5", "v0.9", "v01.5")


def probe_cli_without_unique(ctx):
    return [_cli(ctx, "n10", "n2", "n010", "n02"), _cli(ctx, "-r", "a1", "a10", "a2")]


def probe_cli_filters(ctx):
    return [_cli(ctx, "-f", "2", "5", "x1", "x3", "x6", "x4"), _cli(ctx, "-e", "3", "x1", "x3", "x6"),
            _cli(ctx, "-t", "real", "a-5", "a+2", "a1.5")]


def probe_natsorted_api(ctx):
    n = _ns(ctx)
    return [n.natsorted(["num10", "num2", "num1"]), n.natsorted(["a01", "a1"], alg=n.ns.PRESORT),
            n.index_natsorted(["b2", "b10", "b1"]), n.humansorted(["b", "A", "a"])]


def probe_keygen(ctx):
    n = _ns(ctx)
    return [list(n.natsort_keygen()("a10b2")), list(n.natsort_keygen(alg=n.ns.IGNORECASE)("ABC1"))]


def probe_os_sorted(ctx):
    n = _ns(ctx)
    return n.os_sorted(["file10.txt", "file2.txt", "file1.txt"])


def probe_version(ctx):
    return _ns(ctx).__version__
