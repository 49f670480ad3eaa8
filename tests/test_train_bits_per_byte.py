"""Bits per byte (train/metrics.with_bits_per_byte): Σ NLL over the loss-masked targets / (ln 2 · the UTF-8 bytes they
decode to), so byte-token and BPE runs compare. Checked against a naive reference that decodes each run of masked
targets and counts its bytes, and logged by a real training run."""

import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest

from composer2_jax.data import bpe
from composer2_jax.data import tokenizer as tk
from composer2_jax.data.pipeline import DataConfig, make_iterator
from composer2_jax.data.sources import SourceConfig
from composer2_jax.train.loop import stage_config, train
from composer2_jax.train.metrics import byte_length_table, with_bits_per_byte
from experiments import cpt_bulk
from tests.tolerances import FP32_FN

DOCS = ["def naïve(x):\n    return x  # 中文 ✓\n", "print('🐍 snake')\n", "x = 1\ny = 2\n", "é" * 9 + "\n",
        "class A:\n    pass\n", "s = '\\u00e9 → ∑'\n"]
CHATS = [[{"role": "user", "content": "say hi"}, {"role": "assistant", "content": "hi 👋 — ça va? 中文"}],
         [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2"},
          {"role": "assistant", "content": "4 ✓"}]]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A text JSONL and a chat JSONL of short documents with multi-byte characters (nothing is cut by packing)."""
    d = tmp_path_factory.mktemp("bpb_corpus")
    (d / "text.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCS))
    (d / "chat.jsonl").write_text("".join(json.dumps({"messages": m}) + "\n" for m in CHATS))
    return (SourceConfig(kind="jsonl", path=str(d / "text.jsonl")),
            SourceConfig(kind="chat_jsonl", path=str(d / "chat.jsonl"), field="messages"))


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    return bpe.train_bpe(DOCS * 20 + [m["content"] for c in CHATS for m in c] * 20, 300,
                         str(tmp_path_factory.mktemp("bpb_bpe")))


def _naive_bytes(batch: dict, tok: tk.Tokenizer) -> int:
    """Decode each maximal run of loss-masked targets of one document (specials skipped) and count its bytes."""
    total = 0
    for targets, mask, seg in zip(batch["targets"], batch["loss_mask"], batch["segment_ids"]):
        run = []
        for i in range(len(targets) + 1):
            if i < len(targets) and mask[i] and (not run or seg[i] == seg[i - 1]):
                run.append(int(targets[i]))
                continue
            total += len(tok.decode(run, skip_special=True).encode("utf-8"))
            run = [int(targets[i])] if i < len(targets) and mask[i] else []
    return total


def _naive_nll(batch: dict, logits: np.ndarray) -> float:
    """Σ −log softmax(logits)[target] over the loss-masked positions, one position at a time (float64)."""
    total = 0.0
    for b, t in zip(*np.nonzero(batch["loss_mask"])):
        row = logits[b, t].astype(np.float64)
        total += np.log(np.sum(np.exp(row - row.max()))) + row.max() - row[batch["targets"][b, t]]
    return total


def _fake_step(logits):
    """A step whose metrics are the mean NLL of `logits` over the masked targets (as train/step.py reports them)."""
    import jax.numpy as jnp

    def step(state, batch):
        logp = jax.nn.log_softmax(jnp.asarray(logits), axis=-1)
        nll = -jnp.take_along_axis(logp, batch["targets"][..., None], axis=-1)[..., 0]
        mask = batch["loss_mask"].astype(jnp.float32)
        tokens = jnp.maximum(mask.sum(), 1.0)
        return state, dict(ce=jnp.sum(nll * mask) / tokens, tokens=tokens)

    return step


@pytest.mark.parametrize("name", ["byte", "bpe"])
def test_bits_per_byte_matches_the_naive_reference(corpus, bpe_dir, name):
    tok = tk.make_tokenizer(name, bpe_dir if name == "bpe" else None)
    cfg = DataConfig(sources=corpus, seq_len=64, batch_size=4, prefetch_batches=0)
    batch = {k: np.asarray(v) for k, v in next(make_iterator(cfg, tok)).items()}
    assert 0 < batch["loss_mask"].sum() < batch["loss_mask"].size
    logits = np.random.default_rng(0).normal(size=batch["targets"].shape + (512,)).astype(np.float32)
    _, m = jax.jit(with_bits_per_byte(_fake_step(logits), byte_length_table(tok, 512)))(None, batch)
    n_bytes = _naive_bytes(batch, tok)
    assert float(m["bytes"]) == n_bytes
    np.testing.assert_allclose(float(m["bits_per_byte"]), _naive_nll(batch, logits) / (math.log(2) * n_bytes),
                               **FP32_FN)
    if name == "byte":  # one byte per masked target that is not a special token (eos, <|im_end|>)
        masked = batch["targets"][batch["loss_mask"] > 0]
        assert n_bytes == int(np.sum(masked < 256)) < len(masked)


def test_bytes_count_what_the_masked_tokens_decode_to(bpe_dir):
    tok = tk.make_tokenizer("bpe", bpe_dir)
    text = "naïve 中文 🐍"
    ids = np.asarray([tok.bos_id] + tok.encode(text) + [tok.eos_id], np.int32)
    batch = dict(targets=ids[None], loss_mask=np.ones((1, len(ids)), np.int32))
    step = with_bits_per_byte(lambda s, b: (s, dict(ce=np.float32(2.0), tokens=np.float32(len(ids)))),
                              byte_length_table(tok, 512))
    _, m = step(None, batch)
    assert float(m["bytes"]) == len(text.encode())  # bos and eos: 0 bytes; their NLL stays in the sum
    np.testing.assert_allclose(float(m["bits_per_byte"]), 2.0 * len(ids) / (math.log(2) * len(text.encode())),
                               **FP32_FN)
    with pytest.raises(ValueError, match="the tokenizer has 300 ids but the model's vocab_size is 256"):
        byte_length_table(tok, 256)


def _run_config(workdir, sources, tokenizer: tk.TokenizerConfig):
    c = cpt_bulk.get_config("toy")
    c.workdir, c.steps = str(workdir), 2
    c.data.mixture, c.data.sources = "", [dict(kind=s.kind, path=s.path, field=s.field) for s in sources]
    c.data.batch_size, c.data.seq_len, c.data.prefetch_batches = 8, 64, 0
    c.log.every, c.log.progress, c.checkpoint.every = 1, False, 100
    c.tokenizer.name, c.tokenizer.path = tokenizer.name, tokenizer.path
    return c


@pytest.mark.slow  # compiles a toy training step (about 80 s on 2 loaded cores)
@pytest.mark.parametrize("name", ["byte", "bpe"])
def test_a_training_run_logs_bits_per_byte(tmp_path, corpus, bpe_dir, name):
    tcfg = tk.TokenizerConfig(name, bpe_dir if name == "bpe" else "")
    c = _run_config(tmp_path / name, corpus, tcfg)
    result = train(c)
    logged = [json.loads(line) for line in (Path(c.workdir) / "logs" / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in logged if "bits_per_byte" in r]
    assert [r["step"] for r in logged] == [1, 2] and result.bits_per_byte == [r["bits_per_byte"] for r in logged]
    tok = tcfg.build()
    it = make_iterator(stage_config(c).data, tok)
    for rec in logged:  # the same batches again: their masked targets' bytes, and Σ NLL = ce · tokens
        n_bytes = _naive_bytes({k: np.asarray(v) for k, v in next(it).items()}, tok)
        assert rec["bytes"] == n_bytes
        np.testing.assert_allclose(rec["bits_per_byte"], rec["ce"] * rec["tokens"] / (math.log(2) * n_bytes),
                                   **FP32_FN)
