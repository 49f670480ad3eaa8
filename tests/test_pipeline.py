"""experiments/pipeline.py: on a host without sandboxes the RL and evaluation stages say why and are skipped."""

import json

from experiments import pipeline


def test_sandbox_stages_are_skipped_with_the_reason(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(pipeline, "host_problem", lambda: "bubblewrap binary 'bwrap' not found on PATH")
    summary = pipeline.main(["--workdir", str(tmp_path), "--stages", "rl,evaluate"])
    assert [s["stage"] for s in summary] == ["rl", "evaluate"]
    assert all("bwrap' not found" in s["skipped"] and "apt-get install bubblewrap" in s["skipped"] for s in summary)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert lines[-1]["stages"] == 2 and "skipped" in lines[0]


def test_the_pipeline_ends_with_a_table_per_stage():
    summary = [dict(stage="cpt_bulk", first_loss=8.13, last_loss=4.09, first_bpb=9.12, last_bpb=4.567,
                    mtp_accept=[0.913, 0.901], seconds=639.4, cpu_seconds=91.3),
               dict(stage="rl", versions=4, pass_start=0.125, pass_end=0.25, reward_start=0.12, reward_end=0.24,
                    reward_terms=dict(success=0.25, length_penalty=-0.01), summary_fraction=0.5, seconds=300,
                    draft_acceptance=[0.81, 0.79, 0.775]),
               dict(stage="evaluate", pass_rate=0.1875, pass_rate_start=0.125, seconds=40),
               dict(stage="suite", tasks=43, pass_at_1=0.0, errors=0, seconds=120),
               dict(stage="x", skipped="no sandboxes")]
    rows = pipeline.markdown_table(summary, 1100.0, 1050.4).splitlines()
    assert rows[0].startswith("| stage | loss: CE + λ·MTP (first → last) | bits/byte (first → last) | MTP acceptance α "
                              "| RL pass (start → end)")
    assert rows[2] == "| cpt_bulk | 8.130 → 4.090 | 9.120 → 4.567 | 0.913 / 0.901 | – | – | – | – | – | 639 | 91 |"
    assert rows[3] == ("| rl | – | – | drafts 0.810 → 0.775 | 0.125 → 0.250 | 0.120 → 0.240 | success +0.25, "
                       "length_penalty -0.01 | 0.50 | – | 300 | – |")
    assert "| 0.125 → 0.188 | 40 | – |" in rows[4] and "0.000 over 43 tasks, 0 errored" in rows[5]
    assert rows[6].count("|") == rows[0].count("|") and "skipped: no sandboxes" in rows[6]
    assert rows[-1] == "Whole pipeline: 1100 s (1050 CPU s: user + system, this process and its sandboxes)."
