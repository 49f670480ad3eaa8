"""Parent-side setup of logs-utf8-split (run by the verdict runner before any task code, and by the authoring tool
for the hidden values): fresh captures for the detector; their labels never reach the child."""

import importlib.util
import os
import tempfile


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_captures", os.path.join(tests, "gen_captures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixture(ctx):
    """Paths of 250 fresh captures, sorted by capture id."""
    captures = os.path.join(ctx["tmp"], "captures")
    labels = _gen(ctx["tests"]).write_captures(captures, seed=9001, count=250)
    return {"captures": [os.path.join(captures, c + ".jsonl") for c in sorted(labels)]}


def expected(ctx):
    """The hidden values: the true labels (at most 5 wrong)."""
    labels = _gen(ctx["tests"]).write_captures(tempfile.mkdtemp(), seed=9001, count=250)
    assert sum(labels.values()) > 10, "the generator no longer yields affected captures"
    return {"detector_on_fresh_captures": {"labels": [labels[c] for c in sorted(labels)], "wrong_at_most": 5}}
