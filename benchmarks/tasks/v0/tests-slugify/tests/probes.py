"""Probe of a mutation-graded task: run the agent's tests on the variant this child was given
(bench/verdict_runner.py; setup.py lays the variant over a copy of the workspace)."""

import re


def probe_suite(ctx):
    """{"ok": the tests passed, "ran": how many ran}."""
    r = ctx.run(ctx.fixture["command"], timeout=ctx.fixture["timeout_s"])
    ran = re.findall(r"^Ran (\d+) tests?", r["stdout"] + r["stderr"], re.M)
    return {"ok": r["returncode"] == 0, "ran": int(ran[-1]) if ran else 0}
