"""Whole training runs: exact resume after SIGKILL, restore onto another mesh, corrupt checkpoints, NaN stop,
start-up errors. Real orbax checkpoints, real grain pipelines, real subprocesses."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from composer2_jax import schema
from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model_config import model_config
from composer2_jax.train import optim
from composer2_jax.train.checkpoint import Checkpointer, CheckpointError
from composer2_jax.train.loop import NonFiniteLoss, train
from composer2_jax.train.state import abstract_train_state
from experiments import cpt_bulk

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--config.steps=12", "--config.data.batch_size=8", "--config.data.seq_len=32", "--config.log.every=1",
         "--config.checkpoint.every=3", "--config.log.progress=False", "--config.optim.warmup_steps=2"]


def _config(workdir, **kw):
    c = cpt_bulk.get_config("toy")
    c.workdir = str(workdir)
    c.steps, c.data.batch_size, c.data.seq_len = 6, 8, 32
    c.log.every, c.log.progress, c.checkpoint.every = 1, False, 2
    c.optim.warmup_steps = 2
    for k, v in kw.items():
        node = c
        *path, leaf = k.split(".")
        for p in path:
            node = node[p]
        node[leaf] = v
    return c


def _losses(workdir) -> dict[int, float]:
    """step → loss from metrics.jsonl (a resumed run's later lines win)."""
    out = {}
    for line in (Path(workdir) / "logs" / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "loss" in rec:
            out[rec["step"]] = rec["loss"]
    return out


def _run(workdir, extra=(), wait=True):
    cmd = [sys.executable, "-m", "experiments.cpt_bulk", f"--config.workdir={workdir}", *SMALL, *extra]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if wait:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("extra", [(), ("--config.mesh.stage=2", "--config.model.pipeline_repeats=1")],
                         ids=["fsdp", "pipelined"])
def test_sigkill_at_random_step_then_resume_gives_identical_losses(tmp_path, extra):
    full, killed = tmp_path / "full", tmp_path / "killed"
    _run(full, extra)
    kill_at = random.Random(os.getpid()).randint(4, 10)  # after the first checkpoint (step 3), before the end
    proc = _run(killed, extra, wait=False)
    metrics = killed / "logs" / "metrics.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        committed = [p for p in (killed / "checkpoints").glob("*") if p.name.isdigit()] if metrics.exists() else []
        if committed and max(_losses(killed) or {0: 0}) >= kill_at:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"run ended before the kill at step {kill_at}"
    committed = Checkpointer(killed / "checkpoints", async_save=False).steps()
    assert committed and max(committed) < 12
    _run(killed, extra)  # resumes from the newest committed checkpoint
    a, b = _losses(full), _losses(killed)
    assert sorted(a) == sorted(b) == list(range(1, 13))
    assert [a[s] for s in range(1, 13)] == [b[s] for s in range(1, 13)], (kill_at, committed)


def _abstract(config, mesh):
    cfg = model_config(config.model)
    oc = schema.from_config_dict(optim.OptimConfig, config.optim)
    return abstract_train_state(Transformer(cfg), lambda p, n: optim.make_optimizer(oc, p, n), mesh,
                                (config.data.batch_size, config.data.seq_len))[0]


@pytest.mark.slow
def test_checkpoint_restores_onto_a_different_mesh(tmp_path):
    c = _config(tmp_path, steps=2)
    train(c)
    ck = Checkpointer(tmp_path / "checkpoints", async_save=False)
    mesh_a = shd.make_mesh(dict(c.mesh))
    _, state_a, data_a, conf = ck.restore(_abstract(c, mesh_a))
    mesh_b = shd.make_mesh(dict(data=2, fsdp=2, tensor=2))
    step_b, state_b, data_b, _ = ck.restore(_abstract(c, mesh_b))
    assert step_b == 2 and data_a == data_b and conf["steps"] == 2
    for a, b in zip(jax.tree.leaves(state_a.params), jax.tree.leaves(state_b.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    lm = state_b.params["lm_head"]
    assert lm.sharding.mesh.shape["tensor"] == 2 and lm.sharding.spec == shd.logical_to_spec(("embed", "vocab"))
    ck.close()


def test_corrupt_checkpoint_is_a_clear_error_and_the_previous_one_restores(tmp_path):
    c = _config(tmp_path, steps=4)
    train(c)
    ck = Checkpointer(tmp_path / "checkpoints", async_save=False)
    assert ck.steps() == [2, 4]
    assert any(p.is_file() for p in (tmp_path / "checkpoints" / "4" / "state").rglob("*"))
    shutil.rmtree(tmp_path / "checkpoints" / "4" / "state")
    (tmp_path / "checkpoints" / "4" / "state").mkdir()
    abstract = _abstract(c, shd.make_mesh(dict(c.mesh)))
    with pytest.raises(CheckpointError, match=r"(?s)checkpoint step 4 .* is corrupt or incomplete"
                                              r".*older committed steps that may restore: \[2\]"):
        ck.restore(abstract)
    step, state, _, _ = ck.restore(abstract, fallback=True)
    assert step == 2 and int(state.step) == 2
    ck.close()


@pytest.mark.slow
def test_nonfinite_loss_stops_naming_the_step_and_last_checkpoint(tmp_path):
    train(_config(tmp_path, steps=4))
    c = _config(tmp_path, steps=10, **{"optim.lr": float("nan")})
    with pytest.raises(NonFiniteLoss, match=r"non-finite loss/grad at step 6 .*last good checkpoint: step 4"):
        train(c)
    assert Checkpointer(tmp_path / "checkpoints", async_save=False).steps() == [2, 4]  # nothing NaN was saved


def test_startup_errors_name_the_problem(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=str(empty)):
        train(_config(tmp_path / "a", **{"data.sources": [dict(kind="directory", path=str(empty), weight=1.0)]}))
    with pytest.raises(ValueError, match=r"seq_len 34 is not divisible by 2×context = 4"):
        train(_config(tmp_path / "b", **{"data.seq_len": 34, "mesh.fsdp": 4, "mesh.context": 2,
                                         "model.attention_kernel": "ring"}))
    with pytest.raises(ValueError, match=r"global batch 4 is not divisible by stage×data×fsdp×expert = 8"):
        train(_config(tmp_path / "c", **{"data.batch_size": 4}))


@pytest.mark.slow
def test_long_context_stage_runs_with_ring_attention_and_zigzag(tmp_path):
    """cpt_long's ring kernel on a context=2 mesh: the zigzag data path trains and matches context=1."""
    from experiments import cpt_long

    losses = []
    for ctx in (1, 2):
        c = cpt_long.get_config("toy")
        c.workdir = str(tmp_path / f"ctx{ctx}")
        c.init_from = ""
        c.steps, c.data.batch_size, c.data.seq_len = 2, 8, 64
        c.log.progress, c.checkpoint.every = False, 2
        c.mesh.fsdp, c.mesh.context = -1, ctx
        c.model.num_layers = 2
        r = train(c)
        losses.append(r.losses)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
