"""HF config.json reader/writer: the released configs give our presets; unknown or unsupported keys are errors."""

import copy
import json
import os

import pytest

from composer2_jax.convert import hf_config
from composer2_jax.convert.hf_config import arch_dict, hf_model_config, read_hf_config, to_hf_config
from composer2_jax.model_config import PRESETS, get_model_config

DATA = os.path.join(os.path.dirname(__file__), "data", "hf_configs")
RELEASED = ("kimi_k2_5", "kimi_k2", "deepseek_v3")


def _load(name: str) -> dict:
    with open(os.path.join(DATA, f"{name}.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("name", RELEASED)
def test_released_config_gives_preset(name):
    got = arch_dict(hf_model_config(os.path.join(DATA, f"{name}.json")))
    # the kimi_k2_5 preset adds the MTP depth CPT trains (config.py); the released weights carry none
    released_mtp = {"kimi_k2_5": 0}.get(name, get_model_config(name).num_mtp_layers)
    assert got == arch_dict(get_model_config(name, num_mtp_layers=released_mtp))


def test_kimi_k2_5_reads_text_config_and_quantization():
    raw = _load("kimi_k2_5")
    assert hf_config.text_config(raw)["model_type"] == "kimi_k2"
    assert hf_config.quantization_config(raw)["quant_method"] == "compressed-tensors"
    assert hf_model_config(raw).rms_norm_eps == 1e-5


def test_rope_parameters_form_equals_rope_scaling_form():
    """transformers 5 writes rope_parameters (rope_type, rope_theta inside); released files rope_scaling."""
    raw = _load("deepseek_v3")
    rs = raw.pop("rope_scaling")
    theta = raw.pop("rope_theta")
    raw["rope_parameters"] = dict({k: v for k, v in rs.items() if k != "type"}, rope_type="yarn", rope_theta=theta)
    assert arch_dict(hf_model_config(raw)) == arch_dict(get_model_config("deepseek_v3"))


def test_defaults_and_plain_rope():
    raw = _load("kimi_k2")
    assert "rope_interleave" not in raw and hf_model_config(raw).rope_interleave
    raw["rope_interleave"] = False
    raw["rope_scaling"] = None
    cfg = hf_model_config(raw)
    assert not cfg.rope_interleave and cfg.rope_scaling is None and cfg.rope_theta == 50000.0


@pytest.mark.parametrize("name", PRESETS)
def test_writer_round_trip(name):
    cfg = get_model_config(name)
    d = to_hf_config(cfg, extra={"bos_token_id": 1})
    assert d["model_type"] == "deepseek_v3" and d["bos_token_id"] == 1
    assert arch_dict(hf_model_config(json.loads(json.dumps(d)))) == arch_dict(cfg)


def test_writer_output_loads_in_transformers():
    transformers = pytest.importorskip("transformers")
    d = to_hf_config(get_model_config("toy"))
    c = transformers.DeepseekV3Config(**{k: v for k, v in d.items() if k != "model_type"})
    assert c.rope_parameters["rope_type"] == "yarn" and c.rope_parameters["factor"] == 4.0
    assert c.num_hidden_layers == 3 and c.q_lora_rank == 32 and c.rope_interleave


def test_overrides_reach_the_config_dict():
    m = read_hf_config(_load("kimi_k2"), scan_layers=False, dtype="float32")
    assert not m.scan_layers and m.dtype == "float32" and m.num_layers == 61


@pytest.mark.parametrize("key", ["use_sliding_window", "mla_absorb"])
def test_unknown_key_is_an_error_naming_it(key):
    raw = _load("deepseek_v3")
    raw[key] = True
    with pytest.raises(ValueError, match=key) as e:
        hf_model_config(raw)
    assert "Mapped:" in str(e.value)  # lists what is expected


def test_unknown_key_in_text_config_and_wrapper():
    raw = _load("kimi_k2_5")
    bad = copy.deepcopy(raw)
    bad["text_config"]["sliding_window"] = 4096
    with pytest.raises(ValueError, match="sliding_window"):
        hf_model_config(bad)
    bad = copy.deepcopy(raw)
    bad["audio_config"] = {}
    with pytest.raises(ValueError, match="audio_config"):
        hf_model_config(bad)


@pytest.mark.parametrize("key,value", [("hidden_act", "gelu"), ("scoring_func", "softmax"),
                                       ("topk_method", "greedy"), ("attention_bias", True),
                                       ("tie_word_embeddings", True), ("num_key_value_heads", 8),
                                       ("model_type", "llama")])
def test_unsupported_value_is_an_error_naming_the_key(key, value):
    raw = _load("kimi_k2")
    raw[key] = value
    with pytest.raises(ValueError, match=key):
        hf_model_config(raw)


def test_missing_required_key():
    raw = _load("kimi_k2")
    del raw["kv_lora_rank"]
    with pytest.raises(ValueError, match="kv_lora_rank"):
        hf_model_config(raw)


def test_bad_rope_settings():
    raw = _load("kimi_k2")
    raw["rope_scaling"] = dict(raw["rope_scaling"], type="dynamic")
    with pytest.raises(ValueError, match="dynamic"):
        hf_model_config(raw)
    raw = _load("kimi_k2")
    raw["rope_scaling"]["low_freq_factor"] = 1.0
    with pytest.raises(ValueError, match="low_freq_factor"):
        hf_model_config(raw)
