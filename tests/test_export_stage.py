"""`python -m composer2_jax.convert export --ckpt <a stage's checkpoints>`: real stages trained with
`train.loop.train`, exported, loaded with transformers' AutoModelForCausalLM, scored against our Transformer.apply on
the stage's own parameters (held-out tokens, HF_LOGITS_ATOL); the stage's YaRN and MTP depth in config.json; the
tokenizer files copied; bad inputs named; nothing half-written at --out."""

import dataclasses
import json
import logging
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax import sharding as shd
from composer2_jax.convert import CheckpointError, export_hf, exporter, load_hf_checkpoint
from composer2_jax.convert.safetensors_io import SafetensorsDir
from composer2_jax.convert.testing import KIMI_LIKE, random_hf_model
from composer2_jax.data.tokenizer import TokenizerConfig
from composer2_jax.model.transformer import Transformer
from composer2_jax.train import optim as optim_lib
from composer2_jax.train.checkpoint import Checkpointer
from composer2_jax.train.loop import config_record, load_stage_params, stage_config, train
from composer2_jax.train.state import TrainState, abstract_train_state, train_state_from
from experiments import cpt_bulk, cpt_long
from tests.tolerances import HF_LOGITS_ATOL

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _small(c, workdir, steps=2):
    """A stage config cut to `steps` steps of tiny batches, checkpointing every step."""
    c.workdir, c.init_from = str(workdir), ""
    c.steps = c.optim.total_steps = steps
    c.data.batch_size, c.data.seq_len = 8, 64
    c.optim.warmup_steps = 1
    c.log.progress, c.checkpoint.every, c.checkpoint.async_save = False, 1, False
    return c


def _abstract(run):
    mesh = shd.make_mesh(run.mesh)
    make_tx = lambda p, names: optim_lib.make_optimizer(run.optim, p, names)  # noqa: E731
    shape = (run.data.batch_size, run.data.seq_len)
    return mesh, abstract_train_state(Transformer(run.model, mesh), make_tx, mesh, shape)


def _project_logits(checkpoints: str, cfg, tokens) -> np.ndarray:
    """Our logits (fp32) on the parameters of the stage's newest step, restored the way init_from restores them."""
    run = dataclasses.replace(stage_config(cpt_bulk.get_config("toy")), model=cfg)
    _, (abstract, _, _) = _abstract(run)
    params, router = jax.device_get(load_stage_params(checkpoints, abstract))
    ev = dataclasses.replace(cfg, dtype="float32", remat_policy="none", attention_kernel="xla")
    fn = jax.jit(lambda v, t: Transformer(ev).apply(v, t).logits)
    return np.asarray(fn({"params": params, "router_state": router}, jnp.asarray(tokens)))


def _hf_logits(out: str, tokens) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(out, attn_implementation="eager",
                                                              dtype=torch.float32).eval()
    assert type(model).__name__ == "DeepseekV3ForCausalLM"
    with torch.no_grad():
        return model(input_ids=torch.as_tensor(tokens, dtype=torch.long)).logits.float().numpy()


def _env():
    return dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _cli_export(*args) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.time()
    res = subprocess.run([sys.executable, "-m", "composer2_jax.convert", "export", *map(str, args)], cwd=ROOT,
                         env=_env(), capture_output=True, text=True)
    return res, time.time() - t0


def _config(out) -> dict:
    with open(os.path.join(out, "config.json")) as f:
        return json.load(f)


# ------------------------------------------------------------------------------------------ stages


@pytest.fixture(scope="module")
def hf_stage(tmp_path_factory):
    """A cpt_bulk stage on a tiny DeepseekV3 built by transformers (random non-trivial weights, YaRN 64 → 512):
    step 1 = the imported weights with a fresh optimizer (saved by Checkpointer), steps 2-3 = `train` resumed for two
    real steps (the first at the warm-up's learning rate 0). Returns (workdir, model config, the imported params)."""
    hf_dir = tmp_path_factory.mktemp("hf_src")
    random_hf_model(KIMI_LIKE, seed=0).save_pretrained(hf_dir)
    cfg, params, router = load_hf_checkpoint(str(hf_dir), scan_layers=True)
    imported = jax.tree.map(np.array, params)  # a copy: CPU device_put may alias the host arrays
    workdir = tmp_path_factory.mktemp("hf_stage") / "cpt_bulk"
    run = stage_config(_small(cpt_bulk.get_config("toy"), workdir, steps=3))
    run = dataclasses.replace(run, model=dataclasses.replace(cfg, remat_policy="none"))
    mesh, (abstract, shardings, tx) = _abstract(run)
    state = train_state_from(jax.device_put(params, shardings.params), jax.device_put(router, shardings.router_state),
                             tx, shardings, mesh)
    state = state.replace(step=jax.device_put(jnp.asarray(1, jnp.int32), shardings.step))
    ck = Checkpointer(workdir / "checkpoints", async_save=False)
    ck.save(1, state, {}, config_record(run))
    ck.close()
    result = train(run)  # resumes step 1, trains steps 2 and 3 on real data, saves them
    assert result.final_step == 3 and len(result.losses) == 2 and np.all(np.isfinite(result.losses))
    return str(workdir), run.model, imported


@pytest.fixture(scope="module")
def long_stage(tmp_path_factory):
    """A real cpt_long toy stage (fresh init, 2 steps) asked to reach 2,048 tokens: YaRN extended from the toy's
    4 × 256 to 8 × 256 (train/init_from.extend_context), MTP depth 2, byte tokenizer."""
    workdir = tmp_path_factory.mktemp("long_stage") / "cpt_long"
    c = _small(cpt_long.get_config("toy"), workdir)
    c.context_length = 2048
    result = train(c)
    assert result.final_step == 2 and result.model.num_mtp_layers == 2
    assert result.model.rope_scaling.original_max_position_embeddings == 256 and result.model.rope_scaling.factor == 8
    return str(workdir), result.model


def test_stage_trained_from_hf_weights_exports_and_scores_like_the_project(hf_stage, tmp_path):
    workdir, cfg, imported = hf_stage
    out = tmp_path / "hf"
    res, secs = _cli_export("--ckpt", workdir, "--out", out)  # the workdir form, newest step
    assert res.returncode == 0, res.stderr
    print(f"\n[export stage] KIMI_LIKE cpt_bulk step 3: export {secs:.1f} s (CLI process, incl. imports)")
    assert "byte tokenizer" in res.stderr and "no tokenizer files to copy" in res.stderr
    assert not os.path.exists(str(out) + ".partial")
    config = _config(out)
    assert config["rope_scaling"] == dict(dataclasses.asdict(cfg.rope_scaling), type="yarn")
    assert config["num_nextn_predict_layers"] == 0
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (256, 257, 258)
    # The exported weights are the trained step's, not the imported ones.
    st = SafetensorsDir(str(out))
    q = np.array(st.get("model.layers.1.self_attn.q_b_proj.weight"))
    assert q.dtype == np.float32
    ref = imported["stack"]["layer_0"]["attn"]["q_b_proj"][0]  # unit 0 = layer 1
    assert np.max(np.abs(q - ref.reshape(ref.shape[0], -1).T)) > 1e-6
    # Held-out tokens beyond YaRN's original_max_position_embeddings (64).
    tokens = np.random.default_rng(7).integers(0, cfg.vocab_size, (2, 96))
    ours = _project_logits(os.path.join(workdir, "checkpoints"), cfg, tokens)
    theirs = _hf_logits(str(out), tokens)
    diff = float(np.max(np.abs(ours - theirs)))
    print(f"[export stage] KIMI_LIKE T=96: max |delta logit| = {diff:.3e} (|logit| max {np.abs(ours).max():.2f}, "
          f"atol {HF_LOGITS_ATOL})")
    assert diff <= HF_LOGITS_ATOL


def test_cpt_long_stage_exports_its_yarn_and_mtp_depth(long_stage, tmp_path):
    workdir, cfg = long_stage
    ckpts = os.path.join(workdir, "checkpoints")
    t0 = time.time()
    out = export_hf(ckpts, str(tmp_path / "hf"), step=2)  # the checkpoints/ form, an explicit step
    secs = time.time() - t0
    config = _config(out)
    recorded = Checkpointer(ckpts, async_save=False).saved_config(2)["model"]
    assert config["rope_scaling"] == dict(recorded["rope_scaling"], type="yarn")
    assert config["rope_scaling"]["original_max_position_embeddings"] == 256 and config["rope_scaling"]["factor"] == 8
    assert config["num_nextn_predict_layers"] == cfg.num_mtp_layers == 2
    names = set(SafetensorsDir(out).names())
    n = cfg.num_layers
    for m in range(2):  # MTP module m as model.layers.{num_layers + m}.*, the shared embedding/head as copies
        for t in ("enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight",
                  "shared_head.head.weight", "embed_tokens.weight", "self_attn.kv_b_proj.weight",
                  "mlp.experts.0.gate_proj.weight", "mlp.gate.e_score_correction_bias"):
            assert f"model.layers.{n + m}.{t}" in names
    assert not any(k.startswith(f"model.layers.{n + 2}.") for k in names)
    st = SafetensorsDir(out)
    np.testing.assert_array_equal(st.get(f"model.layers.{n}.embed_tokens.weight"), st.get("model.embed_tokens.weight"))
    tokens = np.random.default_rng(8).integers(0, 267, (2, 288))  # byte-tokenizer ids, beyond YaRN's original 256
    ours = _project_logits(ckpts, cfg, tokens)
    theirs = _hf_logits(out, tokens)
    diff = float(np.max(np.abs(ours - theirs)))
    print(f"\n[export stage] toy cpt_long (MTP 2) T=288: max |delta logit| = {diff:.3e} (|logit| max "
          f"{np.abs(ours).max():.3f}); export {secs:.2f} s")
    assert diff <= HF_LOGITS_ATOL
    # The step directory form exports the same bytes.
    again = export_hf(os.path.join(ckpts, "2"), str(tmp_path / "hf2"))
    st2 = SafetensorsDir(again)
    assert sorted(st2.names()) == sorted(names)
    for k in names:
        assert np.array(st2.get(k)).tobytes() == np.array(st.get(k)).tobytes(), k


def test_sft_stage_exports_the_yarn_it_inherited_from_cpt_long(long_stage, tmp_path):
    """sft (init_from = the cpt_long stage's checkpoints) trains on chat rows; its export carries cpt_long's YaRN
    and MTP depth (the recorded, inherited model), not the sft preset's own section."""
    from composer2_jax.data.synthetic import write_stdlib_chats
    from experiments import sft

    chats = tmp_path / "chats.jsonl"
    write_stdlib_chats(str(chats), n=50)
    c = _small(sft.get_config("toy"), tmp_path / "sft")
    c.init_from = os.path.join(long_stage[0], "checkpoints")
    c.data.sources = [dict(kind="chat_jsonl", path=str(chats), weight=1.0)]
    c.data.seq_len = 256  # rows long enough to hold assistant tokens (the only ones with a loss)
    result = train(c)
    assert result.final_step == 2
    out = export_hf(str(tmp_path / "sft"), str(tmp_path / "hf"))
    config = _config(out)
    assert config["rope_scaling"] == dict(dataclasses.asdict(long_stage[1].rope_scaling), type="yarn")
    assert config["rope_scaling"]["original_max_position_embeddings"] == 256
    assert config["num_nextn_predict_layers"] == 2
    tokens = np.random.default_rng(9).integers(0, 267, (1, 144))
    diff = float(np.max(np.abs(_project_logits(str(tmp_path / "sft" / "checkpoints"), result.model, tokens)
                               - _hf_logits(out, tokens))))
    print(f"\n[export stage] toy sft after cpt_long T=144: max |delta logit| = {diff:.3e}")
    assert diff <= HF_LOGITS_ATOL


# -------------------------------------------------------------------------------- RL layout, tokenizer


@pytest.fixture(scope="module")
def kimi_tokenizer(tmp_path_factory):
    """A tiktoken tokenizer directory in Kimi's file layout (ranks + tokenizer_config.json + chat template)."""
    from composer2_jax.data import tokenizer as tk

    d = tmp_path_factory.mktemp("kimi_tok")
    ranks = {bytes([b]): b for b in range(256)}
    tk.save_tiktoken_ranks(ranks, d / "tiktoken.model")
    config = {"added_tokens_decoder": {"256": {"content": "[BOS]"}, "257": {"content": "[EOS]"},
                                       "258": {"content": "<|im_end|>"}, "259": {"content": "[PAD]"}},
              "bos_token": "[BOS]", "eos_token": {"content": "[EOS]"}, "pad_token": "[PAD]"}
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    (d / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    (d / "special_tokens_map.json").write_text(json.dumps({"bos_token": "[BOS]"}))
    (d / "README.md").write_text("not a tokenizer file")
    return d


def _rl_step(long_stage, directory, tokenizer: TokenizerConfig, version=5, drop=None):
    """An RL-layout checkpoint (rl/orchestrator.save: step = weight version, data = loop state, config = the
    RLExperimentConfig record) holding the cpt_long stage's weights."""
    from composer2_jax.rl.orchestrator import rl_config
    from experiments import rl

    workdir, cfg = long_stage
    run = dataclasses.replace(rl_config(rl.get_config("toy")), model=cfg, tokenizer=tokenizer, workdir=str(directory))
    mesh, (abstract, shardings, tx) = _abstract(dataclasses.replace(stage_config(cpt_bulk.get_config("toy")),
                                                                    model=cfg))
    params, router = load_stage_params(os.path.join(workdir, "checkpoints"), abstract)
    if drop:  # a tree the recorded model config does not describe
        params = {k: v for k, v in jax.device_get(params).items() if k != drop}
        state = TrainState(step=np.int32(version), params=params, opt_state=np.zeros((), np.float32),
                           router_state=jax.device_get(router))
    else:
        state = train_state_from(params, router, tx, shardings, mesh)
    ck = Checkpointer(os.path.join(directory, "checkpoints"), async_save=False)
    ck.save(version, state, {"version": version, "counters": {}, "curriculum_position": 0}, config_record(run))
    ck.close()
    return os.path.join(directory, "checkpoints", str(version))


def test_rl_version_exports_with_the_recorded_tokenizer_files(long_stage, kimi_tokenizer, tmp_path):
    step_dir = _rl_step(long_stage, tmp_path / "rl", TokenizerConfig(name="tiktoken", path=str(kimi_tokenizer)))
    res, secs = _cli_export("--ckpt", step_dir, "--out", tmp_path / "hf")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "hf"
    assert sorted(os.listdir(out)) == ["chat_template.jinja", "config.json", "model.safetensors",
                                       "special_tokens_map.json", "tiktoken.model", "tokenizer_config.json"]
    assert (out / "tiktoken.model").read_bytes() == (kimi_tokenizer / "tiktoken.model").read_bytes()
    config = _config(out)
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (256, 257, 259)
    assert config["num_nextn_predict_layers"] == 2
    print(f"\n[export stage] RL version 5 (toy): export {secs:.1f} s (CLI process, incl. imports)")
    # --tokenizer overrides the recorded path (a byte stage has none to copy).
    out2 = export_hf(long_stage[0], str(tmp_path / "hf2"), tokenizer=str(kimi_tokenizer))
    assert "tiktoken.model" in os.listdir(out2) and "README.md" not in os.listdir(out2)


def test_recorded_tokenizer_that_moved_is_named(long_stage, tmp_path):
    gone = tmp_path / "gone_tok"
    step_dir = _rl_step(long_stage, tmp_path / "rl", TokenizerConfig(name="tiktoken", path=str(gone)))
    with pytest.raises(CheckpointError, match=r"tokenizer\.path.*gone_tok does not exist.*--tokenizer"):
        export_hf(step_dir, str(tmp_path / "hf"))
    assert not os.path.exists(tmp_path / "hf") and not os.path.exists(str(tmp_path / "hf") + ".partial")


def test_unrolled_stage_layout_exports_the_same_tensors(long_stage, tmp_path):
    """A stage run with scan_layers=False (params stack_{u}, router_state stack_{u}) exports the same bytes."""
    from composer2_jax.convert.stage import restore_params
    from composer2_jax.model.layer_plan import layer_plan
    from composer2_jax.model.transformer import unstack_params

    workdir, cfg = long_stage
    ckpts = os.path.join(workdir, "checkpoints")
    params, router = restore_params(os.path.join(ckpts, "2"))
    one_by_one = restore_params(os.path.join(ckpts, "2"), batch_bytes=1)  # one leaf per orbax call
    for a, b in zip(jax.tree.leaves((params, router)), jax.tree.leaves(one_by_one), strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    n_units = layer_plan(cfg)[2]
    loop_cfg = dataclasses.replace(cfg, scan_layers=False)
    run = dataclasses.replace(stage_config(cpt_bulk.get_config("toy")), model=loop_cfg, workdir=str(tmp_path / "w"))
    state = TrainState(step=np.int32(2), params=unstack_params(params, n_units), opt_state=np.zeros((), np.float32),
                       router_state=unstack_params(router, n_units))
    ck = Checkpointer(tmp_path / "w" / "checkpoints", async_save=False)
    ck.save(2, state, {}, config_record(run))
    ck.close()
    a = SafetensorsDir(export_hf(ckpts, str(tmp_path / "scan")))
    b = SafetensorsDir(export_hf(str(tmp_path / "w"), str(tmp_path / "loop")))
    assert sorted(a.names()) == sorted(b.names())
    for k in a.names():
        assert np.array(a.get(k)).tobytes() == np.array(b.get(k)).tobytes(), k
    assert _config(tmp_path / "scan") == _config(tmp_path / "loop")


# ------------------------------------------------------------------------------------------ errors


def test_bad_sources_are_named(long_stage, tmp_path):
    workdir, _ = long_stage
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"empty\.? is empty; expected a converted checkpoint"):
        export_hf(str(tmp_path / "empty"), str(tmp_path / "o1"))
    with pytest.raises(FileNotFoundError, match="nowhere does not exist"):
        export_hf(str(tmp_path / "nowhere"), str(tmp_path / "o2"))
    with pytest.raises(CheckpointError, match=r"--step 7 is not a committed checkpoint .*committed steps: \[1, 2\]"):
        export_hf(workdir, str(tmp_path / "o3"), step=7)
    with pytest.raises(CheckpointError, match="step directory of step 2, but --step 1"):
        export_hf(os.path.join(workdir, "checkpoints", "2"), str(tmp_path / "o4"), step=1)
    unfinished = tmp_path / "run" / "checkpoints" / "3.orbax-checkpoint-tmp-17"
    unfinished.mkdir(parents=True)
    with pytest.raises(CheckpointError, match=r"no committed checkpoint .*unfinished saves \['3\.orbax"):
        export_hf(str(tmp_path / "run"), str(tmp_path / "o5"))
    with pytest.raises(CheckpointError, match="is an unfinished save"):
        export_hf(str(unfinished), str(tmp_path / "o5"))
    (tmp_path / "bare" / "checkpoints").mkdir(parents=True)
    with pytest.raises(CheckpointError, match=r"no committed checkpoint in .*bare/checkpoints \(empty"):
        export_hf(str(tmp_path / "bare"), str(tmp_path / "o5"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(CheckpointError, match=r"holds none of.*found \['notes\.txt'\]"):
        export_hf(str(tmp_path / "other"), str(tmp_path / "o6"))
    for k in range(1, 7):
        assert not os.path.exists(tmp_path / f"o{k}") and not os.path.exists(tmp_path / f"o{k}.partial")
    # The CLI says the same in one line, without a traceback.
    res, _ = _cli_export("--ckpt", tmp_path / "empty", "--out", tmp_path / "o7")
    assert res.returncode != 0 and "export: CheckpointError:" in res.stderr and "Traceback" not in res.stderr


def test_unsupported_layout_is_named(long_stage, tmp_path):
    step_dir = _rl_step(long_stage, tmp_path / "rl", TokenizerConfig(), drop="lm_head")
    with pytest.raises(CheckpointError, match=r"unsupported layout .*params missing \['lm_head'\]"):
        export_hf(step_dir, str(tmp_path / "hf"))
    assert not os.path.exists(tmp_path / "hf")


def test_a_failed_export_leaves_nothing_at_out(long_stage, tmp_path, monkeypatch, caplog):
    workdir, _ = long_stage
    real_put, calls = exporter.ShardedWriter.put, []

    def failing_put(self, name, array):  # a disk error half-way through the tensors
        calls.append(name)
        if len(calls) == 40:
            assert os.path.isdir(str(tmp_path / "hf") + ".partial")  # the shards were being written there
            raise OSError(28, "No space left on device")
        real_put(self, name, array)

    monkeypatch.setattr(exporter.ShardedWriter, "put", failing_put)
    with pytest.raises(OSError, match="No space left"):
        export_hf(workdir, str(tmp_path / "hf"), max_shard_bytes=64 << 10)
    assert len(calls) == 40
    assert not os.path.exists(tmp_path / "hf") and not os.path.exists(str(tmp_path / "hf") + ".partial")
    # An existing, non-empty OUT is refused (untouched) without overwrite, replaced whole with it.
    monkeypatch.setattr(exporter.ShardedWriter, "put", real_put)
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        export_hf(workdir, str(tmp_path / "hf"))
    assert os.listdir(tmp_path / "hf") == ["keep.txt"]
    with caplog.at_level(logging.INFO):
        export_hf(workdir, str(tmp_path / "hf"), overwrite=True)
    assert "keep.txt" not in os.listdir(tmp_path / "hf") and "config.json" in os.listdir(tmp_path / "hf")


def test_converted_checkpoint_refuses_a_step(tmp_path):
    from flax import linen as nn

    from composer2_jax.convert import save_checkpoint
    from composer2_jax.model_config import get_model_config

    cfg = get_model_config("toy", num_layers=2, num_mtp_layers=0)
    shapes = jax.eval_shape(Transformer(cfg).init, jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))
    v = nn.unbox(jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes))
    path = save_checkpoint(str(tmp_path / "ck"), cfg, v["params"], v["router_state"])
    with pytest.raises(ValueError, match="is a converted checkpoint"):
        export_hf(path, str(tmp_path / "hf"), step=3)
