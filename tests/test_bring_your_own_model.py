"""README "Bring your own model", run as written: an HF directory (a tiny DeepseekV3 written by transformers with a BPE
tokenizer trained by `tokenizers`) → cpt_bulk → cpt_long → sft → rl → `convert export`, each stage a command line as a
user types it, a few steps each; transformers loads the final export and scores held-out tokens like the project.

The commands are README.md's, with the stage lengths cut to a few steps (the `SHORT` flags) and paths under tmp.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from composer2_jax.convert.testing import KIMI_LIKE, random_hf_model
from tests.markers import needs_sandbox
from tests.tolerances import HF_LOGITS_ATOL

REPO = Path(__file__).resolve().parents[1]
SPEC = dict(KIMI_LIKE, vocab_size=512, max_position_embeddings=2048)  # the BPE's 512 ids; RL prompts of 592
SHORT = ["--config.steps=2", "--config.optim.total_steps=2", "--config.optim.warmup_steps=1",
         "--config.log.progress=False", "--config.checkpoint.async_save=False"]


def _run(tmp, *argv, timeout=900):
    """One command as the README has it, from a fresh working directory; its last JSON line."""
    env = dict(os.environ, PYTHONPATH=str(REPO), XLA_FLAGS="")  # one CPU device, as on a user's laptop
    r = subprocess.run([sys.executable, *argv], cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (argv, r.stdout[-3000:], r.stderr[-6000:])
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


@pytest.mark.slow  # five stages, each its own process and compile (≈ 4–6 minutes on 2 cores)
@needs_sandbox  # RL runs its episodes in real sandboxes
def test_readme_path_from_an_hf_directory_through_every_stage_and_out(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from composer2_jax.convert.testing import hf_logits
    from composer2_jax.data import bpe
    from composer2_jax.data import tokenizer as tk

    base = tmp_path / "base"
    random_hf_model(SPEC, seed=5).save_pretrained(base)
    bpe.train_bpe(bpe.corpus_texts([], limit=400), 512, str(base))
    root = tmp_path / "runs"
    bulk = _run(tmp_path, "-m", "experiments.cpt_bulk", f"--config.init_from={base}", f"--config.workdir={root}/bulk",
                *SHORT)
    assert bulk["final_step"] == 2
    long = _run(tmp_path, "-m", "experiments.cpt_long", f"--config.init_from={root}/bulk",
                f"--config.workdir={root}/long", *SHORT)
    sft = _run(tmp_path, "-m", "experiments.sft", f"--config.init_from={root}/long",
               f"--config.workdir={root}/sft", *SHORT)
    assert long["final_step"] == sft["final_step"] == 2
    rl = _run(tmp_path, "-m", "experiments.rl", f"--config.init_from={root}/sft",
              f"--config.workdir={root}/rl", "--config.rl.steps=2", "--config.rl.groups_per_batch=2",
              "--config.rl.samples=2", "--config.rl.eval_every=0", "--config.trainer.rows=4",
              "--config.log.progress=False", timeout=1500)
    assert rl["sft"] == "found" and rl["final_version"] == 2
    out = tmp_path / "exported"
    _run(tmp_path, "-m", "composer2_jax.convert", "export", "--ckpt", f"{root}/rl", "--out", str(out))

    # transformers loads the export and scores held-out tokens like the project's model on the RL checkpoint
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["rope_scaling"]["factor"] == 8.0 and cfg["num_nextn_predict_layers"] == 2
    hf_tok, ours_tok = AutoTokenizer.from_pretrained(out), tk.make_tokenizer("auto", str(base))
    held_out = "def held_out(x):\n    return sorted(set(x))\n"
    assert hf_tok(held_out, add_special_tokens=False)["input_ids"] == ours_tok.encode(held_out)
    tokens = np.asarray([ours_tok.encode(held_out * 3)[:96]])
    from composer2_jax.bench.engine_policy import load_checkpoint

    engine, _ = load_checkpoint(str(root / "rl" / "checkpoints"))
    from composer2_jax.model import Transformer

    ours = np.asarray(Transformer(engine.cfg).apply({"params": engine.params, "router_state": engine.router_state},
                                                    tokens).logits)
    theirs = hf_logits(AutoModelForCausalLM.from_pretrained(out, dtype="float32", attn_implementation="eager").eval(),
                       tokens)
    assert np.max(np.abs(ours - theirs)) < HF_LOGITS_ATOL
