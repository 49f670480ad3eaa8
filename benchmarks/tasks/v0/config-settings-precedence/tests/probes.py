"""Probes of config-settings-precedence: settings loaded from file, environment and overrides
(bench/verdict_runner.py)."""

import json
import os
import sys
import tempfile


def _cfg(ctx):
    fd, path = tempfile.mkstemp(suffix=".json", dir=ctx.tmp)
    with os.fdopen(fd, "w") as f:
        json.dump({"port": 8000, "workers": 4, "debug": True, "host": "0.0.0.0", "unknown": 1}, f)
    return path


def probe_env_beats_file(ctx):
    s = ctx.load("app.settings").load(_cfg(ctx), environ={"APP_PORT": "9000", "APP_DEBUG": "off"})
    return [s["port"], s["debug"], s["workers"], s["host"]]


def probe_overrides_beat_env(ctx):
    return ctx.load("app.settings").load(_cfg(ctx), environ={"APP_PORT": "9000"}, overrides={"port": 7000})["port"]


def probe_types(ctx):
    load = ctx.load("app.settings").load
    s = load(None, environ={"APP_DEBUG": "FALSE", "APP_WORKERS": "8", "APP_ALLOWED_ORIGINS": "a.com, b.com"})
    out = [s["debug"], s["workers"], s["allowed_origins"]]
    return out + [load(None, environ={"APP_DEBUG": text})["debug"] for text in ("Yes", "0", "on", "no")]


def probe_bad_values(ctx):
    load = ctx.load("app.settings").load
    out = []
    for env, word in (({"APP_DEBUG": "maybe"}, "debug"), ({"APP_PORT": "eighty"}, "port")):
        message = ctx.message(ValueError, load, None, environ=env)
        out.append(message is not None and word in message)
    return out


def probe_unknown_keys_ignored(ctx):
    settings = ctx.load("app.settings")
    s = settings.load(_cfg(ctx), environ={"APP_COLOR": "red"}, overrides={"other": 1})
    return sorted(s) == sorted(settings.DEFAULTS) and sorted(s)


def probe_missing_file(ctx):
    settings = ctx.load("app.settings")
    return settings.load("/nonexistent.json", environ={}) == settings.DEFAULTS and settings.DEFAULTS


def probe_cli(ctx):
    r = ctx.run([sys.executable, "-m", "app"], env={"APP_PORT": "9100"})
    try:
        return [r["returncode"], json.loads(r["stdout"])["port"]]
    except (ValueError, KeyError, TypeError):
        return [r["returncode"], None]
