"""Logits parity with transformers' DeepseekV3ForCausalLM (torch, CPU, fp32, eager attention) through the real
conversion path: HF save_pretrained → `python -m composer2_jax.convert import` → our forward on the checkpoint."""

import functools
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.convert import export_hf, import_hf, restore_checkpoint
from composer2_jax.convert.testing import DEEPSEEK_LIKE, KIMI_LIKE, hf_logits, random_hf_model
from composer2_jax.model.transformer import Transformer
from tests.tolerances import HF_LOGITS_ATOL

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SPECS = {"deepseek_like": DEEPSEEK_LIKE, "kimi_like": KIMI_LIKE}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """{name: (HF model, tokens, HF logits, {scan: checkpoint})}: the CLI writes the scanned import, the API the
    other."""
    out = {}
    for name, spec in SPECS.items():
        model = random_hf_model(spec, seed=0)
        hf_dir = tmp_path_factory.mktemp(f"{name}_hf")
        model.save_pretrained(hf_dir, max_shard_size="100KB")
        ckpts = {True: str(tmp_path_factory.mktemp(f"{name}_scan") / "ckpt"),
                 False: str(tmp_path_factory.mktemp(f"{name}_loop") / "ckpt")}
        subprocess.run([sys.executable, "-m", "composer2_jax.convert", "import", "--hf", str(hf_dir), "--out",
                        ckpts[True], "--scan"], check=True, cwd=ROOT, env=_env(), capture_output=True)
        import_hf(str(hf_dir), ckpts[False], scan_layers=False)
        tokens = np.random.default_rng(0).integers(0, spec["vocab_size"], (2, 16))
        out[name] = (model, tokens, hf_logits(model, tokens), ckpts)
    return out


def _env():
    return dict(os.environ, JAX_PLATFORMS="cpu", JAX_DEFAULT_MATMUL_PRECISION="highest",
                PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


@functools.cache
def _apply_fn(cfg):
    return jax.jit(lambda v, t: Transformer(cfg).apply(v, t).logits)


def _forward(ckpt, tokens, zero_bias=False):
    cfg, params, state = restore_checkpoint(ckpt, dtype="float32", remat_policy="none")
    if zero_bias:
        state = jax.tree.map(np.zeros_like, state)
    return cfg, np.asarray(_apply_fn(cfg)({"params": params, "router_state": state}, jnp.asarray(tokens)))


@pytest.mark.parametrize("name", sorted(SPECS))
def test_logits_match_hf(converted, name):
    _, tokens, ref, ckpts = converted[name]
    cfg, ours = _forward(ckpts[True], tokens)
    assert cfg.scan_layers
    diff = float(np.max(np.abs(ours - ref)))
    print(f"\n[hf parity] {name}: max |delta logit| = {diff:.3e} (|logit| max {np.abs(ref).max():.2f}, "
          f"atol {HF_LOGITS_ATOL})")
    assert diff <= HF_LOGITS_ATOL
    # The router bias path is live: without it the routing (and the logits) change far beyond the tolerance.
    _, no_bias = _forward(ckpts[True], tokens, zero_bias=True)
    assert np.max(np.abs(no_bias - ref)) > 100 * HF_LOGITS_ATOL


@pytest.mark.parametrize("name", sorted(SPECS))
def test_scan_and_no_scan_imports_give_identical_logits(converted, name):
    _, tokens, ref, ckpts = converted[name]
    cfg_scan, scan = _forward(ckpts[True], tokens)
    cfg_loop, loop = _forward(ckpts[False], tokens)
    assert cfg_scan.scan_layers and not cfg_loop.scan_layers
    diff = float(np.max(np.abs(scan - loop)))
    print(f"\n[scan vs no-scan] {name}: max |delta logit| = {diff:.3e}")
    assert diff <= HF_LOGITS_ATOL and np.max(np.abs(loop - ref)) <= HF_LOGITS_ATOL


@pytest.mark.parametrize("name", sorted(SPECS))
def test_exported_checkpoint_loads_in_transformers(converted, name, tmp_path):
    _, tokens, ref, ckpts = converted[name]
    out = export_hf(ckpts[True], str(tmp_path / "hf"), max_shard_bytes=64 << 10)
    back = transformers.DeepseekV3ForCausalLM.from_pretrained(out, attn_implementation="eager").eval()
    np.testing.assert_array_equal(hf_logits(back, tokens), ref)


def test_score_cli_matches_hf_log_softmax(converted, tmp_path):
    model, _, _, ckpts = converted["kimi_like"]  # vocabulary 320: byte ids fit
    rng = np.random.default_rng(1)
    seqs = [rng.integers(0, 320, n).tolist() for n in (5, 16, 1, 11)]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"tokens": s}) + "\n" for s in seqs))
    res = subprocess.run([sys.executable, "-m", "composer2_jax.score", "--checkpoint", ckpts[True], "--input",
                          str(inp), "--batch-size", "3"], check=True, cwd=ROOT, env=_env(), capture_output=True,
                         text=True)
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    _check_rows(model, seqs, rows)

    from composer2_jax import score

    text = ["hello, world", "a", "\u00e9t\u00e9 \u2603"]
    (tmp_path / "in.txt").write_text("".join(t + "\n" for t in text), encoding="utf-8")
    score.main(["--checkpoint", ckpts[False], "--input", str(tmp_path / "in.txt"), "--tokenizer", "bytes",
                "--output", str(tmp_path / "out.jsonl")])
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    _check_rows(model, [list(t.encode("utf-8")) for t in text], rows)


def _check_rows(model, seqs, rows):
    assert len(rows) == len(seqs)
    worst = 0.0
    for s, row in zip(seqs, rows, strict=True):
        assert row["tokens"] == s and len(row["logprobs"]) == len(s) and row["logprobs"][0] is None
        logp = torch.log_softmax(torch.as_tensor(hf_logits(model, np.array([s]))[0]), dim=-1).numpy()
        want = np.array([logp[t - 1, s[t]] for t in range(1, len(s))], np.float32)
        got = np.array(row["logprobs"][1:], np.float32)
        worst = max(worst, float(np.max(np.abs(got - want), initial=0.0)))
        assert abs(row["sum"] - float(np.sum(got))) <= HF_LOGITS_ATOL * len(s)
    print(f"\n[score cli] max |delta logprob| = {worst:.3e}")
    assert worst <= HF_LOGITS_ATOL


def test_score_input_parsing():
    from composer2_jax.score import read_sequences

    assert list(read_sequences(['{"tokens": [1, 2]}\n', "\n", '{"tokens": []}'])) == [[1, 2], []]
    assert list(read_sequences(["ab\n", "\n"], "bytes")) == [[97, 98], []]
    with pytest.raises(ValueError, match="line 2"):
        list(read_sequences(['{"tokens": [1]}', "plain text"]))
