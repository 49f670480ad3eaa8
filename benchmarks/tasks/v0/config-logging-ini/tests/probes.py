"""Probes of config-logging-ini: the service's log file and stderr after a run (bench/verdict_runner.py)."""

import os
import re
import shutil
import sys
import tempfile

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING) (service(\.worker)?): (.+)$")


def _run_service(ctx):
    d = tempfile.mkdtemp(dir=ctx.tmp)
    for name in ("service", "logging.ini"):
        src = ctx.path(name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(d, name))
    r = ctx.run([sys.executable, "-m", "service"], cwd=d, timeout=30)
    log = os.path.join(d, "logs", "service.log")
    lines = open(log).read().splitlines() if os.path.exists(log) else None
    return r, lines


def probe_starts_and_logs_file(ctx):
    r, lines = _run_service(ctx)
    if lines is None:
        return [r["returncode"], None]
    parsed = [LINE.match(line) for line in lines]
    return [r["returncode"], [[m.group(1), m.group(2), m.group(4)] if m else None for m in parsed]]


def probe_stderr_has_warnings_only(ctx):
    r, _ = _run_service(ctx)
    return r["stderr"].strip().splitlines()


def probe_code_unchanged(ctx):
    worker = open(ctx.path("service", "worker.py")).read()
    main = open(ctx.path("service", "__main__.py")).read()
    return ['log.warning("queue is almost full")' in worker,
            'logging.config.fileConfig("logging.ini", disable_existing_loggers=False)' in main]
