"""Probes of refactor-optparse-to-argparse: what the command line prints for each invocation
(bench/verdict_runner.py)."""

import json
import os
import sys
import tempfile

TEXT_A = "the cat and the hat\nThe end\n"
TEXT_B = "one two two\n"


def _dir(ctx):
    d = tempfile.mkdtemp(dir=ctx.tmp)
    for name, text in (("a.txt", TEXT_A), ("b.txt", TEXT_B)):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return d


def _run(ctx, d, *args):
    return ctx.run([sys.executable, ctx.path("wordstat.py"), *args], cwd=d)


def _out(ctx, d, *args):
    r = _run(ctx, d, *args)
    return r["stdout"] if r["returncode"] == 0 else None


def _json(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return "not json"


def probe_plain_and_total(ctx):
    d = _dir(ctx)
    both = _out(ctx, d, "a.txt", "b.txt")
    return [_out(ctx, d, "a.txt"), both.splitlines()[-1] if both else None]


def probe_top_short_and_long(ctx):
    d = _dir(ctx)
    return [_out(ctx, d, "-t", "2", "a.txt"), _out(ctx, d, "--top=2", "a.txt"), _out(ctx, d, "a.txt", "--top", "2")]


def probe_ignore_case_json(ctx):
    d = _dir(ctx)
    return [_json(_out(ctx, d, "-i", "-f", "json", "-t", "1", "a.txt")),
            _json(_out(ctx, d, "--format", "json", "b.txt"))]


def probe_quiet_combined_flags(ctx):
    d = _dir(ctx)
    return [_out(ctx, d, "-qi", "a.txt", "b.txt"), _out(ctx, d, "--quiet", "--ignore-case", "a.txt")]


def probe_errors(ctx):
    d = _dir(ctx)
    out = []
    for args in ([], ["-t", "x", "a.txt"], ["-f", "xml", "a.txt"], ["--bogus", "a.txt"], ["-t", "-1", "a.txt"]):
        r = _run(ctx, d, *args)
        out.append([r["returncode"] not in (0, None), bool(r["stderr"].strip())])
    return out


def probe_help(ctx):
    r = _run(ctx, _dir(ctx), "--help")
    return [r["returncode"]] + [opt in r["stdout"] for opt in ("--top", "--ignore-case", "--format", "--quiet")]


def probe_no_optparse(ctx):
    sources = {n: open(ctx.path(n)).read() for n in sorted(os.listdir(ctx.workspace)) if n.endswith(".py")}
    with_optparse = sorted(n for n, text in sources.items() if "optparse" in text)
    return [with_optparse, "argparse" in sources.get("wordstat.py", "")]


def probe_visible_tests_pass(ctx):
    return ctx.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."])["returncode"] == 0
