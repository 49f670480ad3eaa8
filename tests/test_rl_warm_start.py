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
