"""Parent-side setup of logs-usage-overbilling (run by the verdict runner before any task code, and by the authoring
tool for the hidden values): fresh logs for the detector and generated responses; the labels and true token counts
never reach the child."""

import importlib.util
import json
import os
import random
import tempfile


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_usage", os.path.join(tests, "gen_usage.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _responses(gen):
    rng = random.Random(5)
    return [gen.make_response(rng, f"r{i}")[0] for i in range(300)]


def fixture(ctx):
    """Paths of 250 fresh logs (sorted by request id) and of the 300 generated responses."""
    gen = _gen(ctx["tests"])
    logs = os.path.join(ctx["tmp"], "logs")
    rows = gen.write_logs(logs, seed=8080, count=250)
    responses = os.path.join(ctx["tmp"], "responses.json")
    with open(responses, "w") as f:
        json.dump(_responses(gen), f)
    return {"logs": [os.path.join(logs, r + ".jsonl") for r in sorted(rows)], "responses": responses}


def expected(ctx):
    """The hidden values: the true labels (at most 5 wrong) and each response's true output tokens."""
    gen = _gen(ctx["tests"])
    rows = gen.write_logs(tempfile.mkdtemp(), seed=8080, count=250)
    assert sum(bad for bad, _ in rows.values()) > 10, "the generator no longer yields overbilled logs"
    return {"detector_on_fresh_logs": {"labels": [rows[r][0] for r in sorted(rows)], "wrong_at_most": 5},
            "generated_responses": {"value": [gen.true_output(e) for e in _responses(gen)]}}
