"""experiments/pipeline.py: on a host without sandboxes the RL and evaluation stages say why and are skipped."""

import json

from experiments import pipeline


def test_sandbox_stages_are_skipped_with_the_reason(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(pipeline, "host_problem", lambda: "bubblewrap binary 'bwrap' not found on PATH")
    summary = pipeline.main(["--workdir", str(tmp_path), "--stages", "rl,evaluate"])
    assert [s["stage"] for s in summary] == ["rl", "evaluate"]
    assert all("bwrap' not found" in s["skipped"] and "apt-get install bubblewrap" in s["skipped"] for s in summary)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["stages"] == 2 and "skipped" in lines[0]
