"""One model config per run: each stage records its model config; the next stage starts from it (YaRN, MTP depth,
vocabulary), changed only by its own explicit edits, which are logged."""

import dataclasses
import logging

import pytest

from composer2_jax.model_config import RopeScaling, inherit_model, preset
from composer2_jax.train.checkpoint import Checkpointer
from composer2_jax.train.loop import train
from experiments import cpt_bulk, cpt_long, sft


def _small(c, workdir, init_from=""):
    """A stage config cut to two steps of tiny batches."""
    c.workdir, c.init_from = str(workdir), init_from
    c.steps = c.optim.total_steps = 2
    c.data.batch_size, c.data.seq_len = 8, 64
    c.optim.warmup_steps = 1
    c.log.progress, c.checkpoint.every, c.checkpoint.async_save = False, 2, False
    return c


def test_inherit_model_keeps_the_recorded_architecture_and_applies_explicit_edits():
    base = preset("toy")
    recorded = dataclasses.replace(base, rope_scaling=RopeScaling(factor=8.0, original_max_position_embeddings=64),
                                   attention_kernel="ring", vocab_size=640)
    same, changes = inherit_model(recorded, base, base)  # a stage that edits nothing
    assert same.rope_scaling == recorded.rope_scaling and same.vocab_size == 640
    assert same.attention_kernel == base.attention_kernel  # execution fields are the stage's own
    assert changes == {"attention_kernel": ("ring", "xla")}
    edited, changes = inherit_model(recorded, dataclasses.replace(base, rope_theta=1e4), base)
    assert edited.rope_theta == 1e4 and changes["rope_theta"] == (base.rope_theta, 1e4)
    off, changes = inherit_model(recorded, dataclasses.replace(base, num_mtp_layers=0), base)  # explicit opt-out
    assert base.num_mtp_layers == 2 and off.num_mtp_layers == 0 and changes["num_mtp_layers"] == (2, 0)
    assert edited.rope_scaling == recorded.rope_scaling


def test_stage_chain_carries_rope_and_vocab_from_cpt_long_into_sft(tmp_path, caplog):
    bulk = _small(cpt_bulk.get_config("toy"), tmp_path / "bulk")
    # a recorded architecture that differs from the preset: RoPE fit for 128 tokens (YaRN factor 1)
    bulk.model.update(vocab_size=520, num_layers=2)
    bulk.model.rope_scaling.update(factor=1.0, original_max_position_embeddings=128)
    r_bulk = train(bulk)
    long = _small(cpt_long.get_config("toy"), tmp_path / "long", str(tmp_path / "bulk" / "checkpoints"))
    r_long = train(long)
    # inherited, although cpt_long's own section says 512 and 3
    assert r_long.model.vocab_size == 520 and r_long.model.num_layers == 2
    assert r_long.model.rope_scaling.factor == 4.0 and r_long.model.rope_scaling.original_max_position_embeddings \
        == 128  # cpt_long's context_length 512 extends the checkpoint's own 128
    assert r_bulk.model.rope_scaling != r_long.model.rope_scaling
    chats = tmp_path / "chats.jsonl"
    s = _small(sft.get_config("toy"), tmp_path / "sft", str(tmp_path / "long" / "checkpoints"))
    s.data.sources = [dict(kind="chat_jsonl", path=str(chats), weight=1.0)]
    s.data.seq_len = 256  # rows long enough to hold assistant tokens (the only ones with a loss)
    sft.prepare(s)  # writes the transcripts to a missing stdlib_chats.jsonl path only
    from composer2_jax.data.synthetic import write_stdlib_chats
    write_stdlib_chats(str(chats), n=50)
    with caplog.at_level(logging.INFO, logger="composer2_jax.train"):
        r_sft = train(s)
    assert r_sft.model.rope_scaling == r_long.model.rope_scaling and r_sft.model.vocab_size == 520
    assert r_bulk.model.num_mtp_layers == r_long.model.num_mtp_layers == r_sft.model.num_mtp_layers == 2
    for r in (r_bulk, r_long, r_sft):  # every stage trains the MTP heads with CE + self-distillation
        assert r.metrics["mtp/ce_2"] > 0 and 0 < r.metrics["mtp/accept_1"] <= 1 and r.metrics["mtp/kl_1"] > 0
    assert r_long.metrics["mtp/distill_weight"] == 1.0
    assert r_sft.model.attention_kernel == "xla"  # the stage's own kernel, not cpt_long's ring
    assert any("attention_kernel: 'ring' → 'xla'" in m for m in caplog.messages)
    recorded = Checkpointer(tmp_path / "sft" / "checkpoints", async_save=False).saved_config()["model"]
    assert recorded["rope_scaling"]["factor"] == 4.0 and recorded["vocab_size"] == 520


def test_init_from_restores_the_mtp_modules_and_an_opt_out_drops_them(tmp_path):
    import jax
    import numpy as np

    from composer2_jax import sharding as shd
    from composer2_jax.model import Transformer
    from composer2_jax.train import optim
    from composer2_jax.train.loop import load_stage_params
    from composer2_jax.train.state import abstract_train_state

    c = _small(cpt_bulk.get_config("toy"), tmp_path / "bulk")
    c.model.num_layers = 2
    r = train(c)
    mesh = shd.make_mesh(shd.MeshConfig(fsdp=-1))

    def make_tx(p, n):
        return optim.make_optimizer(optim.OptimConfig(), p, n)

    ck = Checkpointer(tmp_path / "bulk" / "checkpoints", async_save=False)
    abstract, _, _ = abstract_train_state(Transformer(r.model, mesh), make_tx, mesh, (8, 64))
    saved = ck.restore(abstract)[1].params
    ck.close()
    params, _ = load_stage_params(str(tmp_path / "bulk" / "checkpoints"), abstract)
    assert set(params["mtp"]) == {"mtp_0", "mtp_1"}
    jax.tree.map(np.testing.assert_array_equal, params["mtp"], saved["mtp"])
    off = dataclasses.replace(r.model, num_mtp_layers=0)
    abstract_off, _, _ = abstract_train_state(Transformer(off, mesh), make_tx, mesh, (8, 64))
    params, _ = load_stage_params(str(tmp_path / "bulk" / "checkpoints"), abstract_off)
    assert "mtp" not in params


def test_init_from_without_a_recorded_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no committed checkpoint"):
        train(_small(sft.get_config("toy"), tmp_path / "sft", str(tmp_path / "nothing")))
