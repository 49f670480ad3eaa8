"""Probes of config-json-defaults: `python3 -m service check` on a fresh checkout (bench/verdict_runner.py)."""

import json
import os
import shutil
import sys
import tempfile


def _fresh_checkout(ctx):
    d = tempfile.mkdtemp(dir=ctx.tmp)
    shutil.copytree(ctx.path("service"), os.path.join(d, "service"))
    shutil.copytree(ctx.path("config"), os.path.join(d, "config"))
    local = os.path.join(d, "config", "local.json")
    if os.path.exists(local):
        os.unlink(local)
    return d


def _check(ctx, d):
    r = ctx.run([sys.executable, "-m", "service", "check"], cwd=d)
    if r["returncode"] != 0:
        return None
    try:
        return json.loads(r["stdout"])
    except ValueError:
        return "not json"


def probe_check_passes_on_fresh_checkout(ctx):
    cfg = _check(ctx, _fresh_checkout(ctx))
    if not isinstance(cfg, dict):
        return cfg
    server = cfg.get("server", {})
    return [server.get("port"), cfg.get("database", {}).get("url"), cfg.get("features"), server.get("timeout_s"),
            cfg.get("log_level")]


def probe_schema_and_code_unchanged(ctx):
    with open(ctx.path("config", "schema.json")) as f:
        schema = json.load(f)
    with open(ctx.path("service", "config.py")) as f:
        code = f.read()
    return [schema["properties"]["log_level"]["enum"], schema["properties"]["database"]["required"],
            "TYPES = {" in code]


def probe_local_override_still_works(ctx):
    d = _fresh_checkout(ctx)
    with open(os.path.join(d, "config", "local.json"), "w") as f:
        json.dump({"server": {"port": 9999}, "log_level": "debug"}, f)
    cfg = _check(ctx, d)
    return cfg["server"]["port"] if isinstance(cfg, dict) else cfg
