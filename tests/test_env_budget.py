"""One disk budget per sandbox lineage (env/budget.py): snapshots, checkpoints and forks of one sandbox share it."""

import os

import pytest

from composer2_jax.env import DiskBudgetExceeded, Environment, SandboxLimits
from composer2_jax.env import testing as envtest
from composer2_jax.env.budget import Lineage, tree_bytes
from composer2_jax.env.sandbox_config import Resources

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")

MiB = 1 << 20
STORAGE = 32 * MiB


def write(env, sid, name: str, mib: int) -> None:
    """Write mib MiB of incompressible bytes to a workspace file."""
    obs = env.call(sid, "run_terminal_cmd", {"command": f"head -c {mib}M /dev/urandom > {name} && sync"})
    assert obs.ok and obs.fields["exit_code"] == 0, obs.content


def test_tree_bytes_counts_blocks_and_hard_links_once(tmp_path):
    (tmp_path / "a").write_bytes(os.urandom(MiB))
    os.link(tmp_path / "a", tmp_path / "b")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "c").write_bytes(os.urandom(MiB // 2))
    naive = sum(os.lstat(p).st_blocks * 512 for p in {tmp_path, tmp_path / "a", tmp_path / "d", tmp_path / "d" / "c"})
    assert tree_bytes(str(tmp_path)) == naive


def test_lineage_refuses_past_its_budget_and_names_both_figures():
    lin = Lineage(100)
    lin.charge("L1", 60)
    lin.check(40, "x")
    with pytest.raises(DiskBudgetExceeded, match=r"60 bytes used .* \+ 41 bytes to freeze > budget 100 bytes"):
        lin.check(41, "snapshot of sandbox s")
    lin.forget({"L1"})
    assert lin.report() == {"lineage": lin.id, "budget_bytes": 100, "used_bytes": 0, "added_bytes": 60, "layers": 0,
                            "refused": 1}
    with pytest.raises(ValueError, match="disk budget 0"):
        Lineage(0)


def test_snapshots_of_one_lineage_share_one_budget_and_the_fifth_is_refused(tmp_path):
    """The issue's case: 32 MiB storage; 30 MiB written before each snapshot. Four fit the default budget
    (4 x 32 MiB), the layer store grows by no more than it, and the fifth is refused with both figures."""
    env = Environment(pool_size=1, limits=SandboxLimits(disk_bytes=STORAGE, timeout_s=60))
    try:
        layers = env.rt.layers.root
        start = tree_bytes(layers)
        sid = env.create()
        snaps = []
        for i in range(4):
            write(env, sid, f"f{i}", 30)
            snaps.append(env.snapshot(sid))
        grown = tree_bytes(layers) - start
        disk = env.disk(sid)
        assert disk["budget_bytes"] == 4 * STORAGE and disk["layers"] == 4
        assert 4 * 30 * MiB <= disk["used_bytes"] <= disk["budget_bytes"]
        assert 4 * 30 * MiB <= grown <= disk["budget_bytes"], grown
        fork = env.fork(snaps[-1])  # a fork of a snapshot of this lineage is in it too
        assert env.disk(fork)["lineage"] == disk["lineage"]
        write(env, fork, "g", 30)
        with pytest.raises(DiskBudgetExceeded, match=rf"used by its snapshot layers \+ \d+ bytes to freeze > budget "
                                                     rf"{4 * STORAGE} bytes"):
            env.snapshot(fork)
        write(env, sid, "f4", 30)
        with pytest.raises(DiskBudgetExceeded, match=f"lineage {disk['lineage']}"):
            env.snapshot(sid)
        assert tree_bytes(layers) - start == grown  # refused before anything was copied
        assert env.disk(sid)["refused"] == 2
        # the sandbox still works, and an explicit budget on a new lineage is honoured
        assert env.call(sid, "run_terminal_cmd", {"command": "ls f4"}).fields["exit_code"] == 0
        other = env.fork(env.import_repo(str(tmp_path)), resources=Resources(disk_budget_bytes=8 * MiB))
        assert env.disk(other)["budget_bytes"] == 8 * MiB and env.disk(other)["lineage"] != disk["lineage"]
        write(env, other, "h", 9)
        with pytest.raises(DiskBudgetExceeded, match=f"budget {8 * MiB} bytes"):
            env.snapshot(other)
        # deleting snapshots frees the lineage's usage once gc removes their layers
        for sbx in (fork, other, sid):
            env.close(sbx)
        for snap in snaps:
            env.delete_snapshot(snap)
        assert env.disk(sid)["used_bytes"] == 0 and env.disk(sid)["added_bytes"] >= 4 * 30 * MiB
        assert tree_bytes(layers) <= start + MiB
    finally:
        env.shutdown()


def test_image_sandbox_snapshots_share_the_budget_of_their_storage_limit():
    """The issue's setting: an image sandbox with storage_mb = 32 (Resources.storage_bytes)."""
    import shutil
    from pathlib import Path

    from composer2_jax.env.images import ImageBuilder

    missing = [b for b in ("podman", "runc", "debootstrap") if shutil.which(b) is None]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but images cannot be built here: {missing} missing")
        pytest.skip(f"{missing} not installed (tests/run.sh installs them)")
    builder = ImageBuilder()
    try:
        image = builder.build(Path(__file__).parent / "data" / "harbor" / "apt-pytest" / "environment")
    finally:
        builder.close()
    with Environment(pool_size=0, limits=SandboxLimits(timeout_s=60)) as env:
        sid = env.fork(env.import_image(image), resources=Resources(storage_bytes=STORAGE))
        for i in range(4):
            write(env, sid, f"/app/f{i}", 30)
            env.snapshot(sid)
        disk = env.disk(sid)
        assert disk["budget_bytes"] == 4 * STORAGE and 4 * 30 * MiB <= disk["used_bytes"] <= 4 * STORAGE
        write(env, sid, "/app/f4", 30)
        with pytest.raises(DiskBudgetExceeded, match=f"budget {4 * STORAGE} bytes"):
            env.snapshot(sid)
