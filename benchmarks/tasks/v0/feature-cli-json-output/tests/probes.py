"""Probes of feature-cli-json-output: what `python3 -m todo list [--pending] [--json]` prints
(bench/verdict_runner.py)."""

import json
import os
import sys
import tempfile


def _todo(ctx, f, *args):
    r = ctx.run([sys.executable, "-m", "todo", "--file", f, *args])
    return r["stdout"] if r["returncode"] == 0 else None


def _file(ctx):
    f = os.path.join(tempfile.mkdtemp(dir=ctx.tmp), "t.txt")
    for title in ("milk", 'say "hi"', "ünïcode"):
        _todo(ctx, f, "add", title)
    _todo(ctx, f, "done", "2")
    return f


def _json(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return "not json"


def probe_json(ctx):
    return _json(_todo(ctx, _file(ctx), "list", "--json"))


def probe_json_pending(ctx):
    return _json(_todo(ctx, _file(ctx), "list", "--pending", "--json"))


def probe_json_empty(ctx):
    return _json(_todo(ctx, os.path.join(tempfile.mkdtemp(dir=ctx.tmp), "none.txt"), "list", "--json"))


def probe_text_unchanged(ctx):
    f = _file(ctx)
    return [_todo(ctx, f, "list"), _todo(ctx, f, "list", "--pending")]
