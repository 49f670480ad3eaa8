"""Parent-side setup of logs-stream-dedup (run by the verdict runner before any task code, and by the authoring tool
for the hidden values): fresh sessions for the detector and generated streams; the labels and the correct texts
never reach the child."""

import hashlib
import importlib.util
import json
import os
import random
import tempfile


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_streams", os.path.join(tests, "gen_streams.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sessions(gen):
    rng = random.Random(99)
    return [gen.make_session(rng, f"t{i}")[0] for i in range(300)]


def fixture(ctx):
    """Paths of 250 fresh sessions (sorted by session id) and of the 300 generated streams."""
    gen = _gen(ctx["tests"])
    logs = os.path.join(ctx["tmp"], "sessions")
    labels = gen.write_logs(logs, seed=777, count=250)
    streams = os.path.join(ctx["tmp"], "streams.json")
    with open(streams, "w") as f:
        json.dump(_sessions(gen), f)
    return {"sessions": [os.path.join(logs, s + ".jsonl") for s in sorted(labels)], "streams": streams}


def expected(ctx):
    """The hidden values: the true labels (precision and recall >= 0.95) and the sha256 of the correct texts."""
    gen = _gen(ctx["tests"])
    labels = gen.write_logs(tempfile.mkdtemp(), seed=777, count=250)
    assert sum(labels.values()) > 10, "the generator no longer yields affected sessions"
    texts = [gen.correct_assemble(events) for events in _sessions(gen)]
    canonical = json.dumps(texts, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return {"detector_on_fresh_sessions": {"labels": [labels[s] for s in sorted(labels)], "precision": 0.95,
                                           "recall": 0.95},
            "generated_sessions_match_the_protocol": {"sha256": hashlib.sha256(canonical.encode()).hexdigest()}}
