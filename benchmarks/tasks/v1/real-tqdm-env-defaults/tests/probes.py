"""Probes of real-tqdm-env-defaults: what the workspace's tqdm answers (bench/verdict_runner.py).

Fail-to-pass (tqdm 4.66.0, "environment variables TQDM_* override defaults"; the history holds the release's
`tqdm.utils.envwrap` helper, its tests and the README's troubleshooting entry, and nothing using them): a TQDM_NAME
variable set when the program starts overrides the default of the bar's NAME argument (the suffix matched without
regard to case, the value converted to the type of the default), an explicit argument still wins, unknown names are
ignored, subclasses and the command-line tool get the same defaults; the command-line tool keeps parsing its
options. Pass-to-pass: the bar's arguments, meter formatting and command line as 4.65.2 answered them. Only
arguments whose default is not None are set from the environment here (4.66.0 converts the others to str).

Each probe runs a fresh interpreter (the environment is read once, when tqdm is set up) that imports the
workspace's tqdm and prints its answer as JSON.
"""

import json
import re
import sys

PRELUDE = """
import io, json, os, sys
sys.path.insert(0, {ws!r})
import tqdm, tqdm.std
assert os.path.realpath(tqdm.__file__).startswith(os.path.realpath({ws!r}) + os.sep), tqdm.__file__
out = io.StringIO()
"""


def _py(ctx, body, env=None, stdin=None, argv=None):
    """Run PRELUDE + body (which sets `answer`) in a fresh interpreter with env; the answer, or what went wrong."""
    code = PRELUDE.format(ws=ctx.workspace) + body + "\nprint('ANSWER ' + json.dumps(answer))\n"
    r = ctx.run([sys.executable, "-c", code] + (argv or []), cwd=ctx.tmp, env=dict(env or {}), timeout=30,
                input=stdin)
    for line in r["stdout"].splitlines():
        if line.startswith("ANSWER "):
            return json.loads(line[7:])
    return {"failed": r["returncode"], "error": (r["stderr"].strip().splitlines() or [""])[-1][:200]}


def _cli(ctx, args, env=None, stdin="a\nb\nc\n"):
    """`python -m tqdm ARGS` on stdin: exit status, stdout, and the bar's last state on stderr (times dropped)."""
    code = ("import sys, runpy; sys.path.insert(0, %r); sys.argv = ['tqdm'] + %r; "
            "runpy.run_module('tqdm', run_name='__main__')" % (ctx.workspace, list(args)))
    r = ctx.run([sys.executable, "-c", code], cwd=ctx.tmp, env=dict(env or {}), timeout=30, input=stdin)
    last = r["stderr"].replace("\r", "\n").strip().splitlines()
    bar = last[-1] if last else ""
    unit = re.search(r"(?:[\d?]([^\d\s/]+)/s|s/([^\s\]]+))\]$", bar)  # the rate's unit, either way round
    return [r["returncode"], r["stdout"], bar.split(" [")[0], unit and (unit.group(1) or unit.group(2))]


STATE = """
def state(t):
    return {"mininterval": t.mininterval, "maxinterval": t.maxinterval, "smoothing": t.smoothing, "unit": t.unit,
            "unit_divisor": t.unit_divisor, "n": t.n, "desc": t.desc, "disable": t.disable,
            "types": [type(t.mininterval).__name__, type(t.unit_divisor).__name__, type(t.n).__name__]}
"""


def probe_env_floats(ctx):
    return _py(ctx, STATE + "answer = state(tqdm.tqdm(total=3, file=out))",
               env={"TQDM_MININTERVAL": "3", "TQDM_MAXINTERVAL": "7.5", "TQDM_SMOOTHING": "0.9"})


def probe_env_strings_and_ints(ctx):
    return _py(ctx, STATE + "answer = state(tqdm.tqdm(total=3, file=out))",
               env={"TQDM_UNIT": "B", "TQDM_UNIT_DIVISOR": "1024", "TQDM_INITIAL": "5", "TQDM_DESC": "hello"})


def probe_explicit_argument_wins(ctx):
    return _py(ctx, STATE + "answer = [state(tqdm.tqdm(total=3, file=out, unit='files', mininterval=0.5)), "
               "state(tqdm.tqdm(range(3), desc='keyword', file=out))]",
               env={"TQDM_UNIT": "B", "TQDM_MININTERVAL": "3", "TQDM_DESC": "from-env"})


def probe_env_name_case(ctx):
    return _py(ctx, STATE + "answer = state(tqdm.tqdm(total=3, file=out))",
               env={"TQDM_Unit_Divisor": "2000", "TQDM_smoothing": "0.5", "tqdm_unit": "ignored-prefix-case"})


def probe_unknown_and_unset(ctx):
    return _py(ctx, STATE + "answer = [state(tqdm.tqdm(total=3, file=out)), "
               "tqdm.tqdm(total=1, file=out, bar_format='{n}/{total}').n]",
               env={"TQDM_NOPE": "1", "TQDM_": "x", "OTHER_MININTERVAL": "9"})


def probe_env_disable(ctx):
    return _py(ctx, "for _ in tqdm.tqdm(range(3), file=out): pass\n"
               "t = tqdm.tqdm(total=2, file=out)\nanswer = [out.getvalue(), t.disable]",
               env={"TQDM_DISABLE": "1"})


def probe_env_reaches_subclasses(ctx):
    return _py(ctx, "import tqdm.asyncio, tqdm.auto\n"
               "answer = [tqdm.trange(2, file=out).unit, tqdm.asyncio.tqdm_asyncio(total=2, file=out).unit, "
               "tqdm.auto.tqdm(total=2, file=out).unit, tqdm.asyncio.tqdm_asyncio(total=2, file=out).mininterval]",
               env={"TQDM_UNIT": "rows", "TQDM_MININTERVAL": "2"})


def probe_env_bar_output(ctx):
    return _py(ctx, "for _ in tqdm.tqdm(range(4), file=out, bar_format='{desc}|{n_fmt}/{total_fmt} {unit}'): pass\n"
               "answer = out.getvalue().replace('\\r', '\\n').strip().splitlines()[-1]",
               env={"TQDM_DESC": "job", "TQDM_UNIT": "steps", "TQDM_MININTERVAL": "0"})


def probe_cli_options(ctx):
    return [_cli(ctx, ["--total", "3", "--unit", "x", "--desc", "d", "--mininterval", "0"]),
            _cli(ctx, ["--bytes", "--desc", "b"], stdin="hello world\n")[:3],  # its rate's prefix varies with speed
            _cli(ctx, ["--update", "--total", "10", "--mininterval", "0"], stdin="2\n3\n")]


def probe_cli_with_env(ctx):
    return [_cli(ctx, ["--total", "3", "--desc", "d"], env={"TQDM_UNIT": "lines", "TQDM_MININTERVAL": "0"}),
            _cli(ctx, ["--total", "3", "--unit", "cli", "--mininterval", "0"], env={"TQDM_UNIT": "lines"})]


def probe_cli_help_and_bad_option(ctx):
    code = ("import sys, runpy; sys.path.insert(0, %r); sys.argv = ['tqdm'] + sys.argv[1:]; "
            "runpy.run_module('tqdm', run_name='__main__')" % ctx.workspace)
    h = ctx.run([sys.executable, "-c", code, "--help"], cwd=ctx.tmp, env={}, timeout=30, input="")
    bad = ctx.run([sys.executable, "-c", code, "--no-such-option", "1"], cwd=ctx.tmp, env={}, timeout=30, input="")
    names = [w for w in ("mininterval", "unit_divisor", "delim", "Extra CLI Options") if w in h["stdout"]]
    return [h["returncode"], names, bad["returncode"] != 0, "no-such-option" in bad["stderr"] or
            "no_such_option" in bad["stderr"]]


def probe_envwrap_helper(ctx):
    return _py(ctx, "from tqdm.utils import envwrap\n"
               "@envwrap('FUNC_')\ndef f(a=1, b=2.0, c='x'):\n    return [a, b, c]\n"
               "answer = [f(), f(a=9)]", env={"FUNC_A": "42", "FUNC_B": "2.5"})


def probe_defaults_without_env(ctx):
    return _py(ctx, STATE + "answer = state(tqdm.tqdm(total=3, file=out))")


def probe_format_meter(ctx):
    return _py(ctx, "f = tqdm.tqdm.format_meter\n"
               "answer = [f(5, 10, 2), f(5, 10, 2, ncols=40), f(3, None, 1.5, unit='B', unit_scale=True), "
               "f(2048, 4096, 4, unit='B', unit_scale=True, unit_divisor=1024), tqdm.tqdm.format_sizeof(123456), "
               "tqdm.tqdm.format_interval(3725)]")


def probe_bar_iteration(ctx):
    return _py(ctx, "for _ in tqdm.tqdm(range(5), file=out, mininterval=0, bar_format='{l_bar}{bar:10}| "
               "{n_fmt}/{total_fmt}', ascii=True): pass\n"
               "lines = out.getvalue().replace('\\r', '\\n').strip().splitlines()\nanswer = [lines[0], lines[-1], "
               "tqdm.tqdm(total=4, file=out, initial=2, unit='it').n]")
