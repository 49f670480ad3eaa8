"""A pretrained checkpoint enters a stage: `init_from` = an HF directory, a converted checkpoint or a stage's
checkpoints (train/init_from.py).

The reference is transformers' DeepseekV3ForCausalLM written at test time (composer2_jax/convert/testing.py): the first
training step's CE equals transformers' CE on the same packed batch (each packed document run alone, so the
segment masking is what is checked), the trunk's logits are the checkpoint's with fresh MTP heads added, a YaRN
checkpoint keeps its scaling where it already reaches the stage's context and is extended from its own original
context where not, and bad input is an error naming the thing, with nothing left in the run directory.
"""

import dataclasses
import json
import logging
import os

import jax
import numpy as np
import pytest

from composer2_jax import sharding as shd
from composer2_jax.convert.testing import KIMI_LIKE, random_hf_model
from composer2_jax.data import pipeline as data_lib
from composer2_jax.model import Transformer
from composer2_jax.model_config import RopeScaling, preset
from composer2_jax.train import init_from as init_lib
from composer2_jax.train import optim
from composer2_jax.train.loop import stage_config, train
from composer2_jax.train.state import abstract_train_state
from experiments import cpt_bulk, cpt_long
from tests.tolerances import FP32_BLOCK, HF_LOGITS_ATOL

DOCS = ["def f(x):\n    return x + 1\n", "import os\nprint(os.sep)\n" * 3, "class A:\n    pass\n",
        "x = [i * i for i in range(10)]\n" * 2, "while True:\n    break\n", "a, b = 1, 2\n" * 5] * 8


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """A Kimi-shaped tiny DeepseekV3 (vocab 320 ≥ the byte tokenizer's 267, YaRN 8× over 64, no MTP) as
    transformers saves it, in several safetensors shards; the torch model beside it."""
    d = tmp_path_factory.mktemp("hf")
    model = random_hf_model(KIMI_LIKE, seed=3)
    model.save_pretrained(d, max_shard_size="100KB")
    return str(d), model


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCS))
    return str(path)


def _stage(workdir, init_from, corpus, **edits):
    """A toy cpt_bulk config: one step at lr 0 on packed JSONL documents, from init_from."""
    c = cpt_bulk.get_config("toy")
    c.workdir, c.init_from = str(workdir), init_from
    c.steps = c.optim.total_steps = 1
    c.optim.lr, c.optim.warmup_steps = 0.0, 0
    c.step.router_bias_rate = 0.0  # lr 0 and no bias step: the stage's checkpoint holds the source's weights
    c.data.mixture, c.data.sources = "", [dict(kind="jsonl", path=corpus, weight=1.0)]
    c.data.batch_size, c.data.seq_len, c.data.shuffle = 8, 64, False
    c.log.progress, c.checkpoint.every, c.checkpoint.async_save = False, 1, False
    for k, v in edits.items():
        node, *path = k.split(".")
        target = c
        for p in [node] + path[:-1]:
            target = target[p]
        target[path[-1] if path else node] = v
    return c


def _hf_packed_ce(model, batch) -> float:
    """transformers' mean CE over loss-masked tokens, each packed document run alone at its own positions."""
    import torch

    total, count = 0.0, 0
    for r in range(batch["tokens"].shape[0]):
        seg = batch["segment_ids"][r]
        for s in np.unique(seg[seg > 0]):
            idx = np.nonzero(seg == s)[0]
            toks = torch.as_tensor(batch["tokens"][r, idx][None], dtype=torch.long)
            pos = torch.as_tensor(batch["positions"][r, idx][None], dtype=torch.long)
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=toks, position_ids=pos).logits.double(), -1)[0].numpy()
            tgt, m = batch["targets"][r, idx], batch["loss_mask"][r, idx]
            total -= float(np.sum(logp[np.arange(len(idx)), tgt] * m))
            count += int(m.sum())
    return total / count


def test_first_step_loss_equals_transformers_on_a_packed_batch(hf_dir, corpus, tmp_path, caplog):
    path, hf = hf_dir
    c = _stage(tmp_path / "bulk", path, corpus)
    with caplog.at_level(logging.INFO, logger="composer2_jax.train"):
        r = train(c)
    run = stage_config(c)
    batch = next(data_lib.make_iterator(run.data, run.tokenizer.build(), 0, 1))
    assert batch["segment_ids"].max() >= 2  # documents share rows: segment masking matters
    want = _hf_packed_ce(hf, batch)
    np.testing.assert_allclose(r.metrics["ce"], want, **FP32_BLOCK)
    # the model is the checkpoint's (config.json), fresh MTP heads on top: the preset's depth 2 over the checkpoint's 0
    assert r.model.vocab_size == 320 and r.model.num_layers == 3 and r.model.rope_scaling.factor == 8.0
    assert r.model.num_mtp_layers == 2
    assert any("MTP depth(s) [0, 1] are new" in m for m in caplog.messages), caplog.messages
    assert any("num_mtp_layers: 0 → 2" in m for m in caplog.messages), caplog.messages


def _abstract(cfg, shape=(8, 64)):
    mesh = shd.make_mesh(shd.MeshConfig(fsdp=-1))
    model = Transformer(cfg, mesh)
    abstract, _, _ = abstract_train_state(model, lambda p, n: optim.make_optimizer(optim.OptimConfig(), p, n),
                                          mesh, shape)
    return model, abstract


def _logits(model, params, router_state, tokens):
    return np.asarray(model.apply({"params": params, "router_state": router_state}, tokens).logits)


def test_trunk_logits_are_the_checkpoints_with_fresh_mtp_heads_and_every_source_agrees(hf_dir, corpus, tmp_path):
    from composer2_jax.convert import import_hf
    from composer2_jax.convert.testing import hf_logits

    path, hf = hf_dir
    cfg = init_lib.stage_model("toy", preset("toy"), path, grow_mtp=True)
    assert cfg.num_mtp_layers == 2
    model, abstract = _abstract(cfg)
    params, router = init_lib.load_params(path, abstract, model, seed=0, example_shape=(8, 64))
    assert set(params["mtp"]) == {"mtp_0", "mtp_1"}
    tokens = np.random.default_rng(0).integers(0, 320, (2, 96))  # beyond YaRN's original 64
    ours = _logits(Transformer(cfg), jax.device_get(params), jax.device_get(router), tokens)
    assert np.max(np.abs(ours - hf_logits(hf, tokens))) < HF_LOGITS_ATOL
    # the same weights through a converted checkpoint and through a stage's checkpoint (after one step at lr 0)
    conv = import_hf(path, str(tmp_path / "converted"))
    p2, r2 = init_lib.load_params(conv, abstract, model, seed=0, example_shape=(8, 64))
    train(_stage(tmp_path / "run", path, corpus))
    p3, r3 = init_lib.load_params(str(tmp_path / "run"), abstract, model, seed=0, example_shape=(8, 64))
    for other in ((p2, r2), (p3, r3)):
        jax.tree.map(np.testing.assert_array_equal, jax.device_get((params, router)), jax.device_get(other))
    # HF → stage (lr 0) → export: transformers gives back the checkpoint's logits
    from transformers import AutoModelForCausalLM

    from composer2_jax.convert import export_hf

    export_hf(str(tmp_path / "run"), str(tmp_path / "exported"))
    back = AutoModelForCausalLM.from_pretrained(tmp_path / "exported", dtype="float32", attn_implementation="eager")
    assert np.max(np.abs(hf_logits(back.eval(), tokens) - hf_logits(hf, tokens))) < HF_LOGITS_ATOL


def test_shards_are_read_per_device_onto_the_mesh(hf_dir):
    path, _ = hf_dir
    cfg = init_lib.stage_model("toy", dataclasses.replace(preset("toy"), num_mtp_layers=0), path)
    model, abstract = _abstract(cfg)
    params, _ = init_lib.load_params(path, abstract, model)
    experts = params["stack"]["layer_0"]["moe"]["wi_gate"]
    assert experts.sharding == abstract.params["stack"]["layer_0"]["moe"]["wi_gate"].sharding
    assert len(experts.addressable_shards) == 8 and experts.shape[0] == 2  # [U, E, D, F], a unit axis of 2


def test_yarn_checkpoint_is_kept_where_it_reaches_and_extended_from_its_own_original(hf_dir):
    path, _ = hf_dir  # factor 8 over 64: reaches 512
    kept = init_lib.stage_model("toy", cpt_long_model(), path, context_length=512)
    assert kept.rope_scaling == RopeScaling(factor=8.0, original_max_position_embeddings=64, beta_fast=32.0,
                                            beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)
    longer = init_lib.stage_model("toy", cpt_long_model(), path, context_length=2048)
    assert longer.rope_scaling == dataclasses.replace(kept.rope_scaling, factor=32.0)
    assert longer.max_position_embeddings == 2048
    plain = dataclasses.replace(preset("toy"), rope_scaling=None, max_position_embeddings=4096)
    ext = init_lib.extend_context(plain, 32768)
    assert ext.rope_scaling.factor == 8.0 and ext.rope_scaling.original_max_position_embeddings == 4096
    assert init_lib.rope_reach(ext) == 32768 and init_lib.extend_context(ext, 16384).rope_scaling == ext.rope_scaling
    # the real presets' cpt_long extends from what the model has: Kimi K2.5's 64 × 4,096 already reaches 256k
    k25 = cpt_long.get_config("kimi_k2_5")
    assert stage_config(k25).context_length == 262144
    assert init_lib.extend_context(preset("kimi_k2_5"), 262144).rope_scaling == preset("kimi_k2_5").rope_scaling
    k2 = init_lib.extend_context(preset("kimi_k2"), 262144).rope_scaling  # 32 × 4,096 → 64 × 4,096
    assert k2.factor == 64.0 and k2.original_max_position_embeddings == 4096 and k2.beta_fast == 1.0


def cpt_long_model():
    return dataclasses.replace(preset("toy"), attention_kernel="ring")


def test_bad_sources_name_what_is_wrong_and_leave_nothing(hf_dir, corpus, tmp_path):
    path, _ = hf_dir
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no committed checkpoint.*config.json"):
        init_lib.resolve(str(empty))
    # an unsupported architecture names the config.json key and value
    bad = tmp_path / "gelu"
    bad.mkdir()
    for name in os.listdir(path):
        os.symlink(os.path.join(path, name), bad / name)
    os.unlink(bad / "config.json")
    cfg = json.load(open(os.path.join(path, "config.json")))
    (bad / "config.json").write_text(json.dumps(dict(cfg, hidden_act="gelu")))
    with pytest.raises(ValueError, match="hidden_act='gelu' is not supported"):
        train(_stage(tmp_path / "run_gelu", str(bad), corpus))
    assert not (tmp_path / "run_gelu").exists()
    # a missing shard names the file
    gone = tmp_path / "gone"
    gone.mkdir()
    shards = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    for name in os.listdir(path):
        if name != shards[-1]:
            os.symlink(os.path.join(path, name), gone / name)
    with pytest.raises(Exception, match=shards[-1]):
        train(_stage(tmp_path / "run_gone", str(gone), corpus))
    assert not (tmp_path / "run_gone" / "checkpoints").exists()
    # a model section that disagrees with the checkpoint's tensors names the tensor and both shapes
    with pytest.raises(Exception, match=r"shape \[.*\].*expected|expects"):
        c = _stage(tmp_path / "run_wide", path, corpus)
        c.model.hidden_size = 128  # an explicit departure from the preset: a model the checkpoint does not hold
        train(c)
