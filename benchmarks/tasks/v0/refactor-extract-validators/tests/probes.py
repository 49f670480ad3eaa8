"""Probes of refactor-extract-validators: validator answers, what the callers accept, and where the regexes live
(bench/verdict_runner.py)."""

import ast
import sys

EMAILS = ["ann@example.com", "A.B+tag@sub.example.co.uk", " bo@example.org ", "no-at.example.com", "x@y", "x@y.c",
          "ann@exa mple.com", "ann@@example.com", "ann@example.COM", "ann@-.com"]
PHONES = ["+442079460958", "+44 (20) 7946-0958", "555.123.4567", "12", "+1234567890123456", "phone",
          "0049 30 1234567"]


def probe_functions(ctx):
    v = ctx.load("shop.validators")
    return [[bool(v.is_email(e)) for e in EMAILS], [bool(v.is_phone(p)) for p in PHONES]]


def _outcome(ctx, fn, *args):
    """"ok" if the call returns, "invalid" if it raises the shop's ValidationError, else the exception's type."""
    error = ctx.load("shop.users").ValidationError
    try:
        fn(*args)
    except error:
        return "invalid"
    except Exception as e:  # noqa: BLE001 - which exception is the answer
        return type(e).__name__
    return "ok"


def probe_callers_agree_with_validators(ctx):
    make_user, place_order = ctx.load("shop.users").make_user, ctx.load("shop.orders").place_order
    out = [[_outcome(ctx, make_user, "Ann", e), _outcome(ctx, place_order, ["pen"], e)] for e in EMAILS]
    return out + [[_outcome(ctx, make_user, "Ann", "a@b.io", p), _outcome(ctx, place_order, ["pen"], "a@b.io", p)]
                  for p in PHONES]


def probe_no_regex_left_in_callers(ctx):
    out = []
    for path in ("shop/users.py", "shop/orders.py"):
        tree = ast.parse(open(ctx.path(path)).read())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        from_shop = {f"shop.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "shop"
                     for a in n.names}
        out.append(["re" in imported, "shop.validators" in imported | from_shop])
    return out


def probe_visible_tests_pass(ctx):
    return ctx.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."])["returncode"] == 0
