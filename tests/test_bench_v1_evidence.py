"""Suite v1's evidence tasks validate (oracle 1, null 0, every negative 0): a slow test of its own, since every
trial draws fresh weeks of logs (≈ 1–3 min per task on 2 cores)."""

import pytest

from tests.markers import needs_sandbox
from tests.test_bench_v1 import EVIDENCE, _validate


@needs_sandbox
@pytest.mark.slow
def test_every_evidence_task_validates():
    results = _validate(EVIDENCE)
    assert len(results) == len(EVIDENCE)
    bad = {v.task: v.problems for v in results if not v.ok}
    assert not bad, bad
