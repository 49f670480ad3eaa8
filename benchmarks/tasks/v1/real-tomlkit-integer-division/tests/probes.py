"""Probes of real-tomlkit-integer-division: what the workspace's tomlkit returns (bench/verdict_runner.py).

Fail-to-pass: true division of integer items (both operand orders) gives float items that keep sign and comments.
Pass-to-pass: the other integer operators, float items, parsing and dumping, as tomlkit 0.12.1 already did them.
"""


def _tk(ctx):
    return ctx.load("tomlkit")


def _num(x):
    """A number item as [its item type, its Python value, its TOML text]."""
    return [type(x).__name__, x if type(x) in (int, float) else (float(x) if "Float" in type(x).__name__ else int(x)),
            x.as_string() if hasattr(x, "as_string") else None]


def probe_divide_halves(ctx):
    d = _tk(ctx).parse("timeout = 7\n")
    return _num(d["timeout"] / 2)


def probe_divide_in_place_round_trip(ctx):
    tk = _tk(ctx)
    d = tk.parse("[server]\ntimeout = 7  # seconds\nretries = 3\n")
    d["server"]["timeout"] /= 2
    return tk.dumps(d)


def probe_divide_exact(ctx):
    d = _tk(ctx).parse("n = 8\n")
    return [_num(d["n"] / 2), _num(d["n"] / 8)]


def probe_divide_signed(ctx):
    d = _tk(ctx).parse("a = +34\nb = +3\n")
    return [_num(d["a"] / 2), _num(d["b"] / 4)]


def probe_divide_by_float(ctx):
    d = _tk(ctx).parse("n = 5\n")
    return [_num(d["n"] / 2.5), _num(d["n"] / 0.5)]


def probe_reflected_divide(ctx):
    d = _tk(ctx).parse("n = 4\n")
    return [_num(2 / d["n"]), _num(10 / d["n"]), _num(1.0 / d["n"])]


def probe_divide_by_zero(ctx):
    d = _tk(ctx).parse("n = 4\n")
    return [ctx.message(ZeroDivisionError, lambda: d["n"] / 0) is not None,
            ctx.message(ZeroDivisionError, lambda: 3 / _tk(ctx).parse("z = 0\n")["z"]) is not None]


def probe_divide_integer_items(ctx):
    d = _tk(ctx).parse("a = 9\nb = 2\n")
    return [_num(d["a"] / d["b"]), _num(d["b"] / d["a"])]


def probe_divide_then_dump_document(ctx):
    tk = _tk(ctx)
    d = tk.parse("# top\nx = 3 # three\ny = +10\n")
    d["x"] = d["x"] / 4
    d["y"] /= 4
    return [tk.dumps(d), tk.parse(tk.dumps(d)).unwrap()]


def probe_other_operators(ctx):
    d = _tk(ctx).parse("n = 7\n")
    n = d["n"]
    return [_num(n + 1), _num(n - 10), _num(n * 3), _num(n // 2), _num(n % 4), _num(n ** 2), _num(-n), _num(abs(n))]


def probe_in_place_add_round_trip(ctx):
    tk = _tk(ctx)
    d = tk.parse("int = +34 # c\n")
    d["int"] += 1
    return tk.dumps(d)


def probe_float_items(ctx):
    d = _tk(ctx).parse("f = 2.5\n")
    f = d["f"]
    return [_num(f / 2), _num(f * 2), _num(f + 1)]


def probe_parse_dump_unchanged(ctx):
    tk = _tk(ctx)
    src = '[a]\nb = 1\nc = "x"\n[a.d]\ne = [1, 2]\n[[f]]\ng = true\n'
    return [tk.dumps(tk.parse(src)) == src, tk.parse(src).unwrap()]


def probe_overwrite_sub_table(ctx):
    tk = _tk(ctx)
    d = tk.parse("[t]\nx = 1\n[t.sub]\ny = 2\n")
    d["t"]["sub"] = 5
    return [tk.dumps(d), d.unwrap()]


def probe_builders(ctx):
    tk = _tk(ctx)
    doc = tk.document()
    doc.add("n", tk.integer(5))
    doc["n"] = doc["n"] / 2
    t = tk.table()
    t.add("k", 1)
    doc.add("t", t)
    return tk.dumps(doc)
