"""Issue #24's evidence band for every v1 evidence task, measured from each generator's own ground truth
(benchmarks/evidence_stats.py): the bug at 1-3 % of its units and at least three harmless anomaly kinds at 5-20x its
rate, on the week shipped in the repository and on the verifier's scoring weeks; 500-2,000 files, 20-200 MB and 2-3
sources in the shipped week."""

import pytest

from benchmarks import evidence_stats as es
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
    assert set(es.UNITS) == set(EVIDENCE) and set(es.SCORING) <= set(EVIDENCE) and set(OUT_OF_BAND) <= set(EVIDENCE)
    for task in EVIDENCE:
        names = [w for w, _, _ in es.weeks(task)]
        assert names[0] == "shipped" and len(names) >= 2, names


# Out of issue #24's band as measured by benchmarks/evidence_stats.py on 2026-12-03 and not rebalanced yet (the
# reason: what breaks; in brackets the shipped week's kinds, then the scoring weeks' counts). Strict: a task that
# comes into band must leave this list.
OUT_OF_BAND = {
    "evidence-cdn-cross-tenant": "1 kind in 5-20x (two points of presence 12x; origin errors 4.7x, others 0 or > 40x)",
    "evidence-charge-retry-double": "2 kinds in 5-20x (bought twice 6.6x, timeout before the write 5.0x; 3, 2)",
    "evidence-queue-revoked-offset": "1 kind in 5-20x (transient failures 6.5x; producer retries 3.4x)",
    "evidence-ratelimit-shared-bucket": "2 kinds in 5-20x (over its own limit 7.6x, plan changed 7.1x; 3, 1)",
}


@pytest.mark.slow  # writes each task's shipped week and scoring weeks (≈ 10-40 s a task on 2 cores)
@pytest.mark.parametrize("task", [pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=OUT_OF_BAND[t]))
                                  if t in OUT_OF_BAND else t for t in EVIDENCE])
def test_evidence_task_holds_the_band(task, tmp_path):
    rows = [es.measure(task, week, gen, kwargs, str(tmp_path)) for week, gen, kwargs in es.weeks(task)]
    assert not [(r["week"], r["breaks"]) for r in rows if r["breaks"]], [
        {k: r[k] for k in ("week", "prevalence", "kinds", "files", "mb", "sources", "breaks")} for r in rows]
