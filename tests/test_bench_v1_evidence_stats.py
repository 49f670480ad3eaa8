"""Issue #24's evidence band for every v1 evidence task, measured from each generator's own ground truth
(benchmarks/tasks/evidence_stats.py): the bug at 1-3 % of its units and at least three harmless anomaly kinds at 5-20x
its
rate, on the week shipped in the repository and on the verifier's scoring weeks; 500-2,000 files, 20-200 MB and 2-3
sources in the shipped week."""

import pytest

from benchmarks.tasks import evidence_stats as es
from tests.test_bench_v1 import EVIDENCE


def test_the_measuring_core_on_made_up_labels():
    labels = {"u%d" % i: i < 2 for i in range(100)}  # 2 % hurt
    kinds = {"retried": 10, "logout": 41, "rare": 3, "repeated_line": (30, 200, "lines")}
    row = es.rates(labels, kinds)
    assert (row["units"], row["bug"], row["prevalence"]) == (100, 2, 0.02)
    assert row["kinds"]["retried"]["x"] == 5.0 and row["kinds"]["logout"]["x"] == 20.5
    assert row["kinds"]["repeated_line"] == {"count": 30, "rate": 0.15, "x": 7.5, "total": 200, "unit": "lines"}
    assert row["in_band"] == ["repeated_line", "retried"]
    row.update(files=499, mb=20.0, sources=["a", "b"])
    assert es.verdict(row, volume_too=True) == ["2 kinds in 5-20x", "files 499"]
    assert es.verdict(row, volume_too=False) == ["2 kinds in 5-20x"]
    table = es.markdown([dict(row, task="evidence-x", week="shipped", unit="session", breaks=[])])
    assert "**retried 5.0×**" in table and "logout 20.5×" in table and "| yes |" in table


def test_every_evidence_task_is_declared():
    assert es.tasks() == sorted(EVIDENCE)
    assert set(es.UNITS) == set(EVIDENCE) and set(es.SCORING) <= set(EVIDENCE)
    for task in EVIDENCE:
        names = [w for w, _, _ in es.weeks(task)]
        assert names[0] == "shipped" and len(names) >= 2, names


@pytest.mark.slow  # writes each task's shipped week and scoring weeks (≈ 10-40 s a task on 2 cores)
@pytest.mark.parametrize("task", EVIDENCE)
def test_evidence_task_holds_the_band(task, tmp_path):
    rows = [es.measure(task, week, gen, kwargs, str(tmp_path)) for week, gen, kwargs in es.weeks(task)]
    assert not [(r["week"], r["breaks"]) for r in rows if r["breaks"]], [
        {k: r[k] for k in ("week", "prevalence", "kinds", "files", "mb", "sources", "breaks")} for r in rows]
