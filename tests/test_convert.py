"""HF ⇄ converted checkpoints: dequantization against naive loops, safetensors I/O, bit-exact import → export,
MTP layers, fused experts, and errors that name the tensor and the expected shape."""

import json
import logging
import os

import jax
import ml_dtypes
import numpy as np
import pytest

from composer2_jax.convert import CheckpointError, export_hf, import_hf, load_hf_checkpoint, quant
from composer2_jax.convert.checkpoint import flatten, restore_checkpoint, save_checkpoint
from composer2_jax.convert.hf_config import arch_dict
from composer2_jax.convert.safetensors_io import SafetensorsDir, save_file
from composer2_jax.convert.testing import DEEPSEEK_LIKE, KIMI_LIKE, random_hf_model
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.model.transformer import unstack_params
from composer2_jax.model_config import get_model_config

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

BF16, F8 = np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn)


# ----------------------------------------------------------------------------------------- naive references


def naive_fp8_dequant(q, s, block):
    out = np.zeros(q.shape, np.float32)
    for r in range(q.shape[0]):
        for c in range(q.shape[1]):
            out[r, c] = np.float32(q[r, c]) * np.float32(s[r // block[0], c // block[1]])
    return out


def naive_int4_dequant(packed, scale, shape, group):
    o, i = shape
    out = np.zeros((o, i), np.float32)
    for r in range(o):
        for c in range(i):
            word = int(packed[r, c // 8]) & 0xFFFFFFFF
            q = ((word >> (4 * (c % 8))) & 0xF) - 8
            out[r, c] = np.float32(q) * np.float32(scale[r, c // group])
    return out


def naive_int4_pack(q):
    o, i = q.shape
    out = np.zeros((o, -(-i // 8)), np.int64)
    for r in range(o):
        for c in range(i):
            out[r, c // 8] |= (int(q[r, c]) + 8) << (4 * (c % 8))
    return out.astype(np.uint32).view(np.int32)


def fp8_quantize(w, block):
    """Block-scaled e4m3 quantization (scale = max|w|/448 per block), as DeepSeek stores it."""
    o, i = w.shape
    s = np.zeros((-(-o // block[0]), -(-i // block[1])), np.float32)
    q = np.zeros(w.shape, F8)
    for a in range(s.shape[0]):
        for b in range(s.shape[1]):
            blk = w[a * block[0]:(a + 1) * block[0], b * block[1]:(b + 1) * block[1]]
            s[a, b] = max(np.abs(blk).max() / 448.0, 1e-12)
            q[a * block[0]:(a + 1) * block[0], b * block[1]:(b + 1) * block[1]] = (blk / s[a, b]).astype(F8)
    return q, s


def int4_quantize(w, group):
    o, i = w.shape
    n = -(-i // group)
    wp = np.zeros((o, n * group), np.float32)
    wp[:, :i] = w
    scale = (np.abs(wp.reshape(o, n, group)).max(-1) / 7.0 + 1e-8).astype(BF16)
    q = np.clip(np.round(wp.reshape(o, n, group) / scale.astype(np.float32)[..., None]), -8, 7)
    return naive_int4_pack(q.reshape(o, -1)[:, :i].astype(np.int8)), scale


# ------------------------------------------------------------------------------------------ dequantization


def test_fp8_block_dequant_matches_naive_loop():
    rng = np.random.default_rng(0)
    q = (rng.standard_normal((200, 300)) * 50).astype(F8)
    s = rng.uniform(1e-4, 1e-2, (2, 3)).astype(np.float32)
    ref = naive_fp8_dequant(q, s, (128, 128))
    np.testing.assert_array_equal(quant.dequant_fp8_block(q, s), ref)
    np.testing.assert_array_equal(quant.dequant_fp8_block(q, s, dtype=BF16), ref.astype(BF16))
    with pytest.raises(ValueError, match=r"expected \[2, 3\]"):
        quant.dequant_fp8_block(q, s[:1])


def test_int4_pack_layout_by_hand():
    q = np.array([[-8, -1, 0, 7, 1, 2, 3, -3]], np.int8)  # unsigned nibbles 0,7,8,15,9,10,11,5 from bit 0 up
    assert quant.pack_int4(q)[0, 0] == np.int32(0x5BA9F870)
    np.testing.assert_array_equal(quant.unpack_int4(quant.pack_int4(q), 8), q)


def test_int4_group_dequant_matches_naive_loop():
    rng = np.random.default_rng(1)
    o, i, g = 40, 100, 32  # i is neither a multiple of 8 nor of 32: padded words and groups
    q = rng.integers(-8, 8, (o, i)).astype(np.int8)
    packed = naive_int4_pack(q)
    np.testing.assert_array_equal(quant.pack_int4(q), packed)
    scale = rng.uniform(0.01, 0.1, (o, 4)).astype(BF16)
    ref = naive_int4_dequant(packed, scale, (o, i), g)
    np.testing.assert_array_equal(quant.dequant_int4_group(packed, scale, np.array([o, i], np.int32)), ref)
    with pytest.raises(ValueError, match="weight_scale"):
        quant.dequant_int4_group(packed, scale[:, :3], (o, i))


# --------------------------------------------------------------------------------------- safetensors I/O


def test_safetensors_io_interoperates(tmp_path):
    from safetensors.torch import load_file
    from safetensors.torch import save_file as torch_save

    rng = np.random.default_rng(0)
    arrays = {"a": rng.standard_normal((3, 5)).astype(np.float32), "b": rng.standard_normal(7).astype(BF16),
              "c": (rng.standard_normal((4, 4)) * 10).astype(F8), "d": np.arange(6, dtype=np.int32).reshape(2, 3)}
    save_file(arrays, str(tmp_path / "model.safetensors"))
    theirs = load_file(str(tmp_path / "model.safetensors"))
    for k, v in arrays.items():
        t = theirs[k]
        raw = t.view(torch.uint8).numpy() if t.dtype in (torch.bfloat16, torch.float8_e4m3fn) else t.numpy()
        assert raw.tobytes() == v.tobytes(), k
    os.remove(tmp_path / "model.safetensors")
    torch_save({"x": torch.randn(3, 4).to(torch.bfloat16), "y": torch.randn(5).to(torch.float8_e4m3fn)},
               str(tmp_path / "model.safetensors"))
    mine = SafetensorsDir(str(tmp_path))
    back = load_file(str(tmp_path / "model.safetensors"))
    assert mine.get("x").dtype == BF16 and mine.get("x").tobytes() == back["x"].view(torch.uint8).numpy().tobytes()
    assert mine.get("y").dtype == F8 and mine.get("y").tobytes() == back["y"].view(torch.uint8).numpy().tobytes()


# -------------------------------------------------------------------------------------------- fixtures


def read_dir(d) -> dict[str, np.ndarray]:
    st = SafetensorsDir(str(d))
    return {n: np.array(st.get(n)) for n in st.names()}


def write_dir(d, tensors: dict, config: dict, shards: int = 2):
    """An HF-style checkpoint directory: config.json + `shards` safetensors files + index."""
    os.makedirs(d, exist_ok=True)
    names = sorted(tensors)
    parts = [names[k::shards] for k in range(shards)]
    wmap = {}
    for k, part in enumerate(parts):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in part}, os.path.join(d, fname))
        wmap.update({n: fname for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f)
    return str(d)


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    """HF save_pretrained of the two tiny architectures (fp32, several shards)."""
    out = {}
    for name, spec in (("deepseek", DEEPSEEK_LIKE), ("kimi", KIMI_LIKE)):
        d = tmp_path_factory.mktemp(f"hf_{name}")
        random_hf_model(spec, seed=1).save_pretrained(d, max_shard_size="100KB")
        out[name] = str(d)
    return out


def released_config(d) -> dict:
    """A config.json in the released form (rope_scaling + rope_theta) from a save_pretrained one."""
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    rp = c.pop("rope_parameters")
    c["rope_theta"] = rp.pop("rope_theta")
    c["rope_scaling"] = dict({k: v for k, v in rp.items() if k != "rope_type"}, type="yarn")
    for k in ("head_dim", "qk_head_dim", "dtype", "transformers_version", "output_router_logits"):
        c.pop(k, None)
    return dict(c, model_type="kimi_k2", torch_dtype="bfloat16", scoring_func="sigmoid", topk_method="noaux_tc")


def assert_same_bytes(a: dict, b: dict):
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), k


# -------------------------------------------------------------------------------------------- round trips


def test_save_pretrained_writes_per_expert_tensors(hf_dirs):
    names = set(read_dir(hf_dirs["deepseek"]))
    assert "model.layers.2.mlp.experts.7.gate_proj.weight" in names
    assert not any("gate_up_proj" in n for n in names)
    assert os.path.exists(os.path.join(hf_dirs["deepseek"], "model.safetensors.index.json"))


@pytest.mark.parametrize("arch", ["deepseek", "kimi"])
def test_import_export_is_bit_exact(hf_dirs, tmp_path, arch):
    ckpt = import_hf(hf_dirs[arch], str(tmp_path / "ckpt"), scan_layers=arch == "kimi")
    out = export_hf(ckpt, str(tmp_path / "hf"), max_shard_bytes=64 << 10)
    assert len([f for f in os.listdir(out) if f.endswith(".safetensors")]) > 1
    assert os.path.exists(os.path.join(out, "model.safetensors.index.json"))
    assert_same_bytes(read_dir(out), read_dir(hf_dirs[arch]))


def test_bf16_release_round_trip_restores_router_dtype(hf_dirs, tmp_path):
    """Released layout: bf16 weights, bf16 router, fp32 bias; the router is imported as fp32 either way."""
    src = {k: (v if k.endswith("e_score_correction_bias") else v.astype(BF16))
           for k, v in read_dir(hf_dirs["kimi"]).items()}
    d = write_dir(tmp_path / "rel", src, released_config(hf_dirs["kimi"]), shards=3)
    for dtype in ("auto", "float32"):
        ckpt = import_hf(d, str(tmp_path / f"ck_{dtype}"), dtype=dtype)
        cfg, params, state = restore_checkpoint(ckpt)
        assert cfg.param_dtype == ("bfloat16" if dtype == "auto" else "float32")
        assert params["embedding"].dtype == (BF16 if dtype == "auto" else np.float32)
        assert params["stack"]["layer_0"]["moe"]["router"].dtype == np.float32
        assert state["stack"]["layer_0"]["moe"]["e_score_correction_bias"].dtype == np.float32
        assert_same_bytes(read_dir(export_hf(ckpt, str(tmp_path / f"out_{dtype}"))), src)
    out = export_hf(ckpt, str(tmp_path / "out_bf16"), dtype="bfloat16")
    with open(os.path.join(out, "config.json")) as f:
        assert json.load(f)["torch_dtype"] == "bfloat16"
    assert read_dir(out)["model.norm.weight"].dtype == BF16


def test_scan_and_unrolled_layouts_hold_the_same_values(hf_dirs):
    cfg, p_scan, s_scan = load_hf_checkpoint(hf_dirs["kimi"], scan_layers=True)
    _, p_loop, s_loop = load_hf_checkpoint(hf_dirs["kimi"], scan_layers=False)
    _, _, n_units, _ = layer_plan(cfg)
    for a, b in ((unstack_params(p_scan, n_units), p_loop), (unstack_params(s_scan, n_units), s_loop)):
        fa, fb = flatten(jax.tree.map(np.asarray, a)), flatten(b)
        assert sorted(fa) == sorted(fb)
        for k in fa:
            np.testing.assert_array_equal(fa[k], fb[k], err_msg=k)


def test_values_land_where_the_model_expects_them(hf_dirs):
    src = read_dir(hf_dirs["deepseek"])
    cfg, params, state = load_hf_checkpoint(hf_dirs["deepseek"], scan_layers=False)
    h, k, v, d = 4, 24, 16, 64
    np.testing.assert_array_equal(params["layers_0"]["attn"]["q_proj"],
                                  src["model.layers.0.self_attn.q_proj.weight"].reshape(h, k, d).transpose(2, 0, 1))
    np.testing.assert_array_equal(params["layers_1"]["attn"]["o_proj"],
                                  src["model.layers.1.self_attn.o_proj.weight"].reshape(d, h, v).transpose(1, 2, 0))
    unit = params["stack_1"]["layer_0"]["moe"]  # layer 3 = unit 1 (2 dense prefix layers)
    np.testing.assert_array_equal(unit["wi_up"][5], src["model.layers.3.mlp.experts.5.up_proj.weight"].T)
    np.testing.assert_array_equal(unit["wo"][2], src["model.layers.3.mlp.experts.2.down_proj.weight"].T)
    np.testing.assert_array_equal(state["stack_0"]["layer_0"]["moe"]["e_score_correction_bias"],
                                  src["model.layers.2.mlp.gate.e_score_correction_bias"])
    np.testing.assert_array_equal(params["lm_head"], src["lm_head.weight"].T)


def test_fused_transformers_expert_layout_is_read(hf_dirs, tmp_path):
    """transformers 5 keeps experts fused in memory: gate_up_proj [E, 2F, D] (gate first), down_proj [E, D, F]."""
    src = read_dir(hf_dirs["kimi"])
    fused = {k: v for k, v in src.items() if ".experts." not in k}
    for i in (1, 2):
        p = f"model.layers.{i}.mlp.experts"
        fused[f"{p}.gate_up_proj"] = np.stack([np.concatenate([src[f"{p}.{j}.gate_proj.weight"],
                                                               src[f"{p}.{j}.up_proj.weight"]]) for j in range(8)])
        fused[f"{p}.down_proj"] = np.stack([src[f"{p}.{j}.down_proj.weight"] for j in range(8)])
    with open(os.path.join(hf_dirs["kimi"], "config.json")) as f:
        d = write_dir(tmp_path / "fused", fused, json.load(f))
    want = flatten(load_hf_checkpoint(hf_dirs["kimi"])[1])
    got = flatten(load_hf_checkpoint(d)[1])
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


# ------------------------------------------------------------------------------------------------- MTP


def _with_mtp(src: dict, layers: int, head_copy: bool = True) -> dict:
    """DeepSeek-V3-style MTP layer `layers` (a copy of the last decoder layer plus enorm/hnorm/eh_proj/shared_head)."""
    rng = np.random.default_rng(3)
    out = dict(src)
    last, mtp = f"model.layers.{layers - 1}.", f"model.layers.{layers}."
    out.update({mtp + k[len(last):]: v + 0.5 for k, v in src.items() if k.startswith(last)})
    d = src["model.norm.weight"].shape[0]
    out[mtp + "enorm.weight"] = rng.standard_normal(d).astype(np.float32)
    out[mtp + "hnorm.weight"] = rng.standard_normal(d).astype(np.float32)
    out[mtp + "eh_proj.weight"] = rng.standard_normal((d, 2 * d)).astype(np.float32)
    out[mtp + "shared_head.norm.weight"] = rng.standard_normal(d).astype(np.float32)
    out[mtp + "embed_tokens.weight"] = src["model.embed_tokens.weight"].copy()
    out[mtp + "shared_head.head.weight"] = src["lm_head.weight"] + (0 if head_copy else 1)
    return out


def test_mtp_layers_import_and_export(hf_dirs, tmp_path):
    with open(os.path.join(hf_dirs["deepseek"], "config.json")) as f:
        config = dict(json.load(f), num_nextn_predict_layers=1)
    src = _with_mtp(read_dir(hf_dirs["deepseek"]), layers=4)
    d = write_dir(tmp_path / "mtp", src, config)
    ckpt = import_hf(d, str(tmp_path / "ck"))
    cfg, params, state = restore_checkpoint(ckpt)
    assert cfg.num_mtp_layers == 1
    m = params["mtp"]["mtp_0"]
    assert sorted(m) == ["block", "eh_proj", "enorm", "final_norm", "hnorm"]  # embedding/head: equal copies, dropped
    np.testing.assert_array_equal(m["eh_proj"], src["model.layers.4.eh_proj.weight"].T)
    np.testing.assert_array_equal(m["block"]["moe"]["wi_gate"][3],
                                  src["model.layers.4.mlp.experts.3.gate_proj.weight"].T)
    assert state["mtp"]["mtp_0"]["block"]["moe"]["e_score_correction_bias"].shape == (8,)
    assert_same_bytes(read_dir(export_hf(ckpt, str(tmp_path / "out"), max_shard_bytes=64 << 10)), src)

    src2 = _with_mtp(read_dir(hf_dirs["deepseek"]), layers=4, head_copy=False)  # a head of its own is kept
    d2 = write_dir(tmp_path / "mtp2", src2, config)
    _, p2, _ = load_hf_checkpoint(d2)
    np.testing.assert_array_equal(p2["mtp"]["mtp_0"]["head"], src2["model.layers.4.shared_head.head.weight"].T)
    ck2 = import_hf(d2, str(tmp_path / "ck2"))
    assert_same_bytes(read_dir(export_hf(ck2, str(tmp_path / "out2"))), src2)


def test_mtp_skipped_or_absent_is_logged_not_fatal(hf_dirs, tmp_path, caplog):
    with open(os.path.join(hf_dirs["deepseek"], "config.json")) as f:
        config = dict(json.load(f), num_nextn_predict_layers=1)
    d = write_dir(tmp_path / "mtp", _with_mtp(read_dir(hf_dirs["deepseek"]), layers=4), config)
    with caplog.at_level(logging.INFO):
        cfg, params, _ = load_hf_checkpoint(d, skip_mtp=True)
    assert cfg.num_mtp_layers == 0 and "mtp" not in params and "skipping" in caplog.text
    absent = write_dir(tmp_path / "absent", read_dir(hf_dirs["deepseek"]), config)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        cfg, params, _ = load_hf_checkpoint(absent)
    assert cfg.num_mtp_layers == 0 and "no model.layers.4." in caplog.text


# ------------------------------------------------------------------------------------------ quantized


def test_fp8_block_checkpoint_is_dequantized(hf_dirs, tmp_path):
    block = (32, 32)  # the release uses 128x128; tiny weights need smaller blocks to span several
    src = read_dir(hf_dirs["kimi"])
    q, ref = {}, {}
    for k, v in src.items():
        keep = (not k.endswith(".weight") or "norm" in k or "embed_tokens" in k or k == "lm_head.weight"
                or k.endswith("mlp.gate.weight"))
        if keep:
            q[k] = v
            continue
        q[k], q[k + "_scale_inv"] = fp8_quantize(v, block)
        ref[k] = naive_fp8_dequant(q[k], q[k + "_scale_inv"], block)
    config = dict(released_config(hf_dirs["kimi"]),
                  quantization_config=dict(quant_method="fp8", fmt="e4m3", activation_scheme="dynamic",
                                           weight_block_size=list(block)))
    d = write_dir(tmp_path / "fp8", q, config)
    cfg, params, _ = load_hf_checkpoint(d, scan_layers=False)
    a = params["layers_0"]["attn"]
    np.testing.assert_array_equal(a["kv_a_proj"], ref["model.layers.0.self_attn.kv_a_proj_with_mqa.weight"].T)
    np.testing.assert_array_equal(a["q_b_proj"], ref["model.layers.0.self_attn.q_b_proj.weight"].T.reshape(24, 4, 24))
    moe = params["stack_1"]["layer_0"]["moe"]
    for j in range(8):
        np.testing.assert_array_equal(moe["wi_gate"][j], ref[f"model.layers.2.mlp.experts.{j}.gate_proj.weight"].T)
        np.testing.assert_array_equal(moe["wo"][j], ref[f"model.layers.2.mlp.experts.{j}.down_proj.weight"].T)
    assert moe["wi_gate"].dtype == np.float32


def test_int4_pack_quantized_experts_are_dequantized(hf_dirs, tmp_path):
    raw = json.load(open(os.path.join(os.path.dirname(__file__), "data", "hf_configs", "kimi_k2_5.json")))
    src = read_dir(hf_dirs["kimi"])
    q, ref = {}, {}
    for k, v in src.items():
        if ".experts." not in k:
            q[k] = v
            continue
        base = k[: -len(".weight")]
        q[base + ".weight_packed"], q[base + ".weight_scale"] = int4_quantize(v, 32)
        q[base + ".weight_shape"] = np.array(v.shape, np.int32)
        ref[k] = naive_int4_dequant(q[base + ".weight_packed"], q[base + ".weight_scale"], v.shape, 32)
    # The K2.5 release: a kimi_k25 wrapper, decoder under language_model.*, a vision tower to skip.
    q = {("language_model." + k): v for k, v in q.items()}
    q["vision_tower.patch_embed.proj.weight"] = np.zeros((4, 3), np.float32)
    raw["text_config"] = dict(released_config(hf_dirs["kimi"]), rms_norm_eps=1e-5)
    d = write_dir(tmp_path / "int4", q, raw)
    cfg, params, _ = load_hf_checkpoint(d, scan_layers=True)
    moe = params["stack"]["layer_0"]["moe"]
    for u, layer in ((0, 1), (1, 2)):
        for j in range(8):
            np.testing.assert_array_equal(moe["wi_up"][u, j],
                                          ref[f"model.layers.{layer}.mlp.experts.{j}.up_proj.weight"].T)
            np.testing.assert_array_equal(moe["wo"][u, j],
                                          ref[f"model.layers.{layer}.mlp.experts.{j}.down_proj.weight"].T)
    np.testing.assert_array_equal(params["lm_head"], src["lm_head.weight"].T)


# --------------------------------------------------------------------------------------------- errors


@pytest.fixture
def kimi_tensors(hf_dirs):
    with open(os.path.join(hf_dirs["kimi"], "config.json")) as f:
        return read_dir(hf_dirs["kimi"]), json.load(f)


def test_missing_tensor_names_it_and_its_shape(kimi_tensors, tmp_path):
    src, config = kimi_tensors
    del src["model.layers.1.self_attn.kv_b_proj.weight"]
    d = write_dir(tmp_path / "x", src, config)
    with pytest.raises(CheckpointError, match=r"missing tensor 'model\.layers\.1\.self_attn\.kv_b_proj\.weight' "
                                              r"\(expected shape \[128, 32\]\)"):
        import_hf(d, str(tmp_path / "ck"))
    assert not os.path.exists(tmp_path / "ck")


def test_missing_expert_names_it(kimi_tensors, tmp_path):
    src, config = kimi_tensors
    del src["model.layers.2.mlp.experts.6.down_proj.weight"]
    with pytest.raises(CheckpointError, match=r"experts\.6\.down_proj\.weight' \(expected shape \[64, 16\]\)"):
        load_hf_checkpoint(write_dir(tmp_path / "x", src, config))


def test_misshaped_tensor_names_it_and_both_shapes(kimi_tensors, tmp_path):
    src, config = kimi_tensors
    src["model.layers.0.mlp.up_proj.weight"] = src["model.layers.0.mlp.up_proj.weight"][:100]
    with pytest.raises(CheckpointError, match=r"'model\.layers\.0\.mlp\.up_proj\.weight' has shape \[100, 64\]; "
                                              r"expected \[128, 64\]"):
        load_hf_checkpoint(write_dir(tmp_path / "x", src, config))


def test_unexpected_tensor_is_an_error(kimi_tensors, tmp_path):
    src, config = kimi_tensors
    src["model.layers.0.self_attn.q_norm.weight"] = np.ones(4, np.float32)
    with pytest.raises(CheckpointError, match=r"q_norm\.weight"):
        load_hf_checkpoint(write_dir(tmp_path / "x", src, config))


def test_existing_output_is_not_overwritten(hf_dirs, tmp_path):
    os.makedirs(tmp_path / "ck")
    with pytest.raises(FileExistsError):
        import_hf(hf_dirs["kimi"], str(tmp_path / "ck"))


# ------------------------------------------------------------------------------------- from model trees


def test_save_and_restore_model_trees(tmp_path):
    import jax.numpy as jnp
    from flax import linen as nn

    from composer2_jax.model.transformer import Transformer

    cfg = get_model_config("toy", num_layers=6, moe_layer_freq=2)  # units of (dense, MoE), one suffix layer
    shapes = jax.eval_shape(Transformer(cfg).init, jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))
    rng = np.random.default_rng(0)
    boxed = jax.tree.map(lambda s: rng.standard_normal(s.shape).astype(s.dtype), shapes)
    assert isinstance(boxed["params"]["embedding"], nn.meta.AxisMetadata)  # boxed, as init returns them
    path = save_checkpoint(str(tmp_path / "ck"), cfg, boxed["params"], boxed["router_state"])
    v = nn.unbox(boxed)
    got_cfg, params, state = restore_checkpoint(path)
    assert got_cfg == cfg
    for a, b in ((params, v["params"]), (state, v["router_state"])):
        fa, fb = flatten(a), flatten(jax.tree.map(np.asarray, b))
        assert sorted(fa) == sorted(fb)
        for k in fa:
            np.testing.assert_array_equal(fa[k], fb[k], err_msg=k)
    _, unrolled, _ = restore_checkpoint(path, scan_layers=False)
    assert "stack_1" in unrolled and "layers_5" in unrolled and "stack" not in unrolled
    # Trained trees go out to HF and come back unchanged (no source metadata: stored dtypes are used).
    out = export_hf(path, str(tmp_path / "hf"))
    back_cfg, back, back_state = load_hf_checkpoint(out)
    assert arch_dict(back_cfg) == arch_dict(cfg)
    for a, b in ((back, params), (back_state, state)):
        fa, fb = flatten(a), flatten(b)
        assert sorted(fa) == sorted(fb)
        for k in fa:
            np.testing.assert_array_equal(fa[k], fb[k], err_msg=k)
