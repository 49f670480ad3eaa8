"""Parent-side setup of logs-heartbeat-timeout (run by the verdict runner before any task code, and by the authoring
tool for the hidden values): fresh captures for the detector and generated sessions for the replay check. The
labels and the correct client's reconnect times never reach the child."""

import importlib.util
import json
import os
import random
import tempfile

ALIVE = {"start", "delta", "heartbeat", "end"}


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_sessions", os.path.join(tests, "gen_sessions.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sessions(gen):
    rng = random.Random(3)
    return [gen.make_session(rng, f"x{i}")[0] for i in range(200)]


def fixture(ctx):
    """Paths of 250 fresh captures (sorted by session id) and of the 200 sessions to replay."""
    gen = _gen(ctx["tests"])
    captures = os.path.join(ctx["tmp"], "captures")
    labels = gen.write_captures(captures, seed=5150, count=250)
    sessions = os.path.join(ctx["tmp"], "sessions.json")
    with open(sessions, "w") as f:
        json.dump(_sessions(gen), f)
    return {"captures": [os.path.join(captures, s + ".jsonl") for s in sorted(labels)], "sessions": sessions}


def expected(ctx):
    """The hidden values: the true labels (at most 5 wrong) and a correct client's reconnect times."""
    gen = _gen(ctx["tests"])
    labels = gen.write_captures(tempfile.mkdtemp(), seed=5150, count=250)
    assert 10 < sum(labels.values()) < len(labels) - 10, "the generator no longer yields both kinds"
    return {"detector_on_fresh_captures": {"labels": [labels[s] for s in sorted(labels)], "wrong_at_most": 5},
            "replay_matches_a_correct_client": {"value": [gen.fires(c, ALIVE) for c in _sessions(gen)]}}
