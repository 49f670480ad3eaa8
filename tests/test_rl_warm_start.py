"""The RL run's SFT warm start is trained on the ids the run's rollouts and evaluation read (its tokenizer)."""

import pytest

from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import render_chat
from composer2_jax.rl import orchestrator
from composer2_jax.train.loop import stage_config
from experiments import rl as rl_exp

MESSAGES = [{"role": "system", "content": "Fix the bug."}, {"role": "user", "content": "Run the tests."},
            {"role": "assistant", "content": "Running the tests.",
             "tool_calls": [{"name": "run_terminal_cmd", "arguments": {"command": "python3 -B test.py"}}]}]


def test_the_warm_start_trains_with_the_runs_tokenizer(tmp_path):
    pytest.importorskip("tokenizers")
    from composer2_jax.data import bpe

    bpe.train_bpe([m["content"] for m in MESSAGES] * 50, 300, str(tmp_path / "tok"))
    c = rl_exp.get_config("toy")
    c.tokenizer.update(name="bpe", path=str(tmp_path / "tok"))
    c.init_from = str(tmp_path / "rl" / "sft" / "checkpoints")
    run = orchestrator.rl_config(c)
    warm = stage_config(rl_exp.sft_config(run))
    assert warm.tokenizer == run.tokenizer
    ids = render_chat(MESSAGES, warm.tokenizer.build()).ids
    assert ids == render_chat(MESSAGES, run.tokenizer.build()).ids
    assert ids != render_chat(MESSAGES, tk.make_tokenizer("byte")).ids  # the toy's default, which it used to get


def test_with_mtp_steps_the_depths_grow_onto_the_trunk_trained_alone(tmp_path):
    """sft.mtp_steps: the trunk trains alone, then the whole model starts from its weights with fresh MTP depths. At a
    vanishing learning rate for the second run the trunk must come out as the first run left it."""
    import json

    import jax
    import numpy as np

    from composer2_jax.bench.engine_policy import load_checkpoint
    from tests.tolerances import FP32_FN

    demos = tmp_path / "demos.jsonl"
    demos.write_text("".join(json.dumps({"messages": MESSAGES}) + "\n" for _ in range(8)))
    c = rl_exp.get_config("toy")
    c.workdir, c.init_from = str(tmp_path / "rl"), str(tmp_path / "rl" / "sft" / "checkpoints")
    c.sft.update(demonstrations=str(demos), steps=5, mtp_steps=2, mtp_lr=1e-12, batch_size=8, seq_len=128)
    trunk, whole = rl_exp.sft_configs(orchestrator.rl_config(c))
    assert (trunk.model.num_mtp_layers, trunk.steps, whole.steps, whole.optim.lr) == (0, 3, 2, 1e-12)
    assert whole.model.num_mtp_layers == c.model.num_mtp_layers > 0
    assert whole.init_from == trunk.workdir + "/checkpoints" != c.init_from

    out = rl_exp.prepare(c)
    assert out["sft"] == "trained" and out["sft_seconds"] >= out["sft_trunk_seconds"] > 0
    alone, _ = load_checkpoint(whole.init_from)
    grown, _ = load_checkpoint(c.init_from)
    assert "mtp" not in alone.params and "mtp" in grown.params
    flat = dict(jax.tree_util.tree_flatten_with_path(grown.params)[0])
    for path, leaf in jax.tree_util.tree_flatten_with_path(alone.params)[0]:
        np.testing.assert_allclose(np.asarray(flat[path]), np.asarray(leaf), **FP32_FN, err_msg=str(path))

    # interrupted before the second run saved: the first resumes as finished (no steps), the second runs again
    import shutil
    shutil.rmtree(tmp_path / "rl" / "sft")
    again = rl_exp.prepare(c)
    assert again["sft"] == "trained" and np.isfinite(again["sft_last_loss"])
    assert "mtp" in load_checkpoint(c.init_from)[0].params


def test_mtp_steps_are_refused_where_they_cannot_run():
    c = rl_exp.get_config("toy")
    c.sft.update(steps=10, mtp_steps=10)
    with pytest.raises(ValueError, match="mtp_steps=10.*steps=10"):
        orchestrator.rl_config(c)
    c.sft.mtp_steps = 4
    c.model.num_mtp_layers = 0
    c.rollout.num_draft = 0
    with pytest.raises(ValueError, match="model.num_mtp_layers=0"):
        orchestrator.rl_config(c)
