"""Probes of real-tabulate-catch-up: what the workspace's tabulate answers (bench/verdict_runner.py).

Fail-to-pass (tabulate 0.9.0): rows given as dataclasses; SEPARATING_LINE rows; rowalign for multi-line rows;
maxheadercolwidths; intfmt; a showindex iterable longer than the table; the new table styles (asciidoc and the simple,
rounded, heavy, mixed and double grid and outline families) listed in tabulate_formats and rendered. Pass-to-pass:
the 0.8.10 styles, alignment, number parsing and formatting, column widths, input kinds, as 0.8.10 rendered them.
"""

ROWS = [["spam", 41.9999, 7], ["eggs", 451.0, 1200], ["bacon", -3.25, 0]]
HEAD = ["item", "price", "qty"]


def _t(ctx):
    return ctx.load("tabulate")


def probe_dataclass_rows(ctx):
    import dataclasses
    t = _t(ctx)

    @dataclasses.dataclass
    class Item:
        name: str
        price: float
        qty: int = 1

    rows = [Item("spam", 41.9999, 7), Item("eggs", 451.0)]
    return [t.tabulate(rows, headers="keys"), t.tabulate(rows), t.tabulate(rows, headers=["a", "b", "c"])]


def probe_separating_line(ctx):
    t = _t(ctx)
    rows = [ROWS[0], t.SEPARATING_LINE, ROWS[1], ROWS[2]]
    return [t.tabulate(rows, headers=HEAD), t.tabulate(rows)]


def probe_row_alignment(ctx):
    t = _t(ctx)
    rows = [["one\ntwo\nthree", 1, "x"], ["a", "b\nc", 2]]
    return [t.tabulate(rows, headers=["k", "v", "w"], tablefmt="grid", rowalign=a) for a in ("top", "center",
                                                                                            "bottom")] + [
        t.tabulate(rows, tablefmt="grid", rowalign=["bottom", "center"])]


def probe_header_widths(ctx):
    t = _t(ctx)
    return [t.tabulate([["verylongword", 1]], headers=["header that is long", "v"], maxheadercolwidths=[6, None]),
            t.tabulate([["ab", 12345]], headers=["first header", "second header"], maxheadercolwidths=5,
                       tablefmt="grid")]


def probe_integer_format(ctx):
    t = _t(ctx)
    return [t.tabulate([[1234567, 89], [-1000, 5]], intfmt=","),
            t.tabulate([[1234567, 2.5]], headers=["n", "f"], intfmt="_", floatfmt=".3f")]


def probe_endless_index(ctx):
    import itertools
    t = _t(ctx)
    # longer than the table, never endless: an implementation that lists the index first must not hang the check
    return [t.tabulate(ROWS, headers=HEAD, showindex=itertools.islice(itertools.count(10), 100000)),
            t.tabulate(ROWS, showindex=iter("abcdefgh"))]


def probe_new_style_names(ctx):
    t = _t(ctx)
    new = ["asciidoc", "double_grid", "double_outline", "heavy_grid", "heavy_outline", "mixed_grid",
           "mixed_outline", "rounded_grid", "rounded_outline", "simple_grid", "simple_outline"]
    return [[n, n in t.tabulate_formats] for n in new]


def probe_asciidoc(ctx):
    t = _t(ctx)
    return [t.tabulate(ROWS, headers=HEAD, tablefmt="asciidoc"), t.tabulate(ROWS, tablefmt="asciidoc")]


def probe_rounded_and_simple_styles(ctx):
    t = _t(ctx)
    return [t.tabulate(ROWS, headers=HEAD, tablefmt=f) for f in ("rounded_grid", "rounded_outline", "simple_grid",
                                                                 "simple_outline")]


def probe_heavy_mixed_double_styles(ctx):
    t = _t(ctx)
    return [t.tabulate(ROWS, headers=HEAD, tablefmt=f) for f in ("heavy_grid", "heavy_outline", "mixed_grid",
                                                                 "mixed_outline", "double_grid", "double_outline")]


def probe_old_styles_unchanged(ctx):
    t = _t(ctx)
    return [str(t.tabulate(ROWS, headers=HEAD, tablefmt=f)) for f in ("simple", "plain", "grid", "fancy_grid", "pipe",
                                                                      "github", "orgtbl", "rst", "psql", "html",
                                                                      "latex", "mediawiki", "tsv", "outline",
                                                                      "fancy_outline")]


def probe_alignment_and_numbers_unchanged(ctx):
    t = _t(ctx)
    rows = [["1.5", "text", None], ["10", "longer text", 3], ["-2.25e3", "x", "n/a"]]
    return [t.tabulate(rows, numalign="left", stralign="right", missingval="?"),
            t.tabulate(rows, floatfmt=".1f", colalign=("center", "left", "right")),
            t.tabulate(rows, disable_numparse=True), t.tabulate([["0x1F", "1e3"]])]


def probe_column_widths_unchanged(ctx):
    t = _t(ctx)
    return [t.tabulate([["a long sentence that wraps", 1]], headers=["text", "n"], maxcolwidths=[10, None]),
            t.tabulate([["line one\nline two", "x"]], headers=["multi", "y"], tablefmt="grid")]


def probe_input_kinds_unchanged(ctx):
    t = _t(ctx)
    return [t.tabulate({"item": ["spam", "eggs"], "qty": [7, 1200]}, headers="keys"),
            t.tabulate([{"a": 1, "b": 2}, {"a": 3, "c": 4}], headers="keys"),
            t.tabulate([["h1", "h2"], [1, 2]], headers="firstrow"),
            t.tabulate(((1, 2), (3, 4))),
            t.tabulate(ROWS, headers=HEAD, showindex=True)]


def probe_per_column_formats_unchanged(ctx):
    t = _t(ctx)
    rows = [[3.14159, 2.71828, 100], [-1.5, 10.0, -7]]
    return [t.tabulate(rows, floatfmt=(".2f", ".0f"), headers=["pi", "e", "n"], tablefmt="pipe"),
            t.tabulate(rows, tablefmt="latex_booktabs"), t.tabulate(rows, tablefmt="jira", headers=["a", "b", "c"])]
