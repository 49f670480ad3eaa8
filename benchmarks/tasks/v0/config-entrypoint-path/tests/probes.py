"""Probes of config-entrypoint-path: what bin/greeter prints when started from elsewhere (bench/verdict_runner.py)."""

import os
import tempfile


def _run(ctx, args, cwd, argv0=None):
    r = ctx.run(["sh", argv0 or ctx.path("bin", "greeter"), *args], cwd=cwd)
    return [r["returncode"], r["stdout"]]


def probe_version_from_elsewhere(ctx):
    code, out = _run(ctx, ["--version"], tempfile.mkdtemp(dir=ctx.tmp))
    return [code, out.strip()]


def probe_hello_from_repo_root_relative(ctx):
    return _run(ctx, ["hello", "Bob"], ctx.workspace, argv0="bin/greeter")


def probe_through_symlink(ctx):
    d = tempfile.mkdtemp(dir=ctx.tmp)
    link = os.path.join(d, "g")
    os.symlink(ctx.path("bin", "greeter"), link)
    return _run(ctx, ["hello", "Cy", "--shout"], d, argv0=link)


def probe_code_still_in_src(ctx):
    return [os.path.isfile(ctx.path("src", "greeter", "cli.py")), os.path.exists(ctx.path("greeter"))]
