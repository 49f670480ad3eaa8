"""Config schemas (composer2_jax/schema.py): dataclass → ConfigDict → dataclass round trips, field help on every
field, unknown keys and bad values named, and every experiment file × preset building its frozen config."""

import dataclasses
import importlib
import subprocess
import sys

import pytest

from composer2_jax import schema
from composer2_jax.data.pipeline import DataConfig
from composer2_jax.data.sources import SourceConfig
from composer2_jax.model_config import PRESETS, ModelConfig, RopeScaling, preset
from composer2_jax.rl.orchestrator import rl_config
from composer2_jax.rl.run_config import RLExperimentConfig
from composer2_jax.train.loop import StageConfig, stage_config
from experiments import base

STAGES = ("cpt_bulk", "cpt_long", "sft")


def _schemas(cls, seen=None) -> set:
    """Every dataclass reachable from `cls` through its fields (the whole schema tree)."""
    seen = set() if seen is None else seen
    if cls in seen:
        return seen
    seen.add(cls)
    hints = schema._hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        for t in (tp, schema._optional_arg(tp), schema._tuple_item(tp)):
            if isinstance(t, type) and dataclasses.is_dataclass(t):
                _schemas(t, seen)
    return seen


@pytest.mark.parametrize("root", [StageConfig, RLExperimentConfig])
def test_every_field_of_every_schema_has_help(root):
    missing = [f"{cls.__name__}.{f.name}" for cls in sorted(_schemas(root), key=lambda c: c.__name__)
               for f in dataclasses.fields(cls) if f.init and f.name not in schema.field_help(cls)]
    assert not missing, f"fields without a comment: {missing}"


def test_field_help_reads_trailing_and_leading_comments_but_not_strings():
    @dataclasses.dataclass(frozen=True)
    class C:
        a: int = 1  # the a
        # the b,
        # over two lines
        b: str = "#not a comment"
        c: tuple = ("x",  # the c
                    "y")

    assert schema.field_help(C) == {"a": "the a", "b": "the b, over two lines", "c": "the c"}


@pytest.mark.parametrize("name", PRESETS)
def test_model_round_trip_through_config_dict(name):
    cfg = preset(name)
    assert schema.from_config_dict(ModelConfig, schema.to_config_dict(cfg), "model") == cfg


def test_round_trip_keeps_nested_optional_and_tuple_fields():
    run = base.base_stage("toy")
    run = dataclasses.replace(run, data=DataConfig(sources=(SourceConfig(kind="jsonl", path="a.jsonl", weight=2.0),
                                                            SourceConfig())))
    c = schema.to_config_dict(run)
    assert isinstance(c.data.sources, list) and c.data.sources[0]["path"] == "a.jsonl"
    c.model.q_lora_rank = None  # a typed None reference: a flag can set it back to an int
    c.model.rope_scaling.factor = 2.0
    back = stage_config(c)
    assert back.model.q_lora_rank is None and back.model.rope_scaling == dataclasses.replace(
        run.model.rope_scaling, factor=2.0)
    assert back.data.sources == run.data.sources and isinstance(back.data.sources, tuple)
    c.model.q_lora_rank = 16
    assert stage_config(c).model.q_lora_rank == 16
    assert stage_config(schema.to_config_dict(run)) == run


def test_unknown_keys_name_the_key_the_section_and_the_closest_known_keys():
    c = base.get_base_config("toy").to_dict()
    c["optim"]["lrr"] = 1.0
    with pytest.raises(schema.ConfigError, match=r"unknown config key 'optim.lrr': section 'optim' has no 'lrr'; "
                                                 r"did you mean 'lr'\? \(known keys: b1, b2, .*warmup_steps"):
        stage_config(c)
    with pytest.raises(schema.ConfigError, match=r"'model.rope_scaling.factr'.*did you mean 'factor'"):
        schema.from_config_dict(ModelConfig, {"rope_scaling": {"factr": 2.0}}, "model")
    with pytest.raises(schema.ConfigError, match=r"unknown config key 'stepz': the top level has no 'stepz'; "
                                                 r"did you mean 'step', 'steps'"):
        stage_config(dict(stepz=3))


@pytest.mark.parametrize("key,value,match", [
    ("steps", -5, r"steps=-5; expected the global step to train until, >= 1"),
    ("steps", "ten", r"config key 'steps' = 'ten' \(str\); expected int"),
    ("data.batch_size", 0, r"data.batch_size must be a positive int, got 0"),
    ("mesh.fsdp", 0, r"mesh.fsdp=0; expected a positive size or -1"),
    ("optim.name", "sgd", r"optim.name='sgd'; expected one of \('adamw', 'muon'\)"),
    ("model.hidden_size", 65, r"model.hidden_size=65 is not divisible by model.num_heads=4"),
    ("checkpoint.every", 0, r"checkpoint.every=0, checkpoint.keep=3; expected >= 1"),
    ("data_shard_by", "hosts", r"data_shard_by='hosts'; expected one of \('documents', 'rows'\)"),
])
def test_out_of_range_values_are_rejected_naming_the_value(key, value, match):
    c = base.get_base_config("toy").to_dict()
    *path, last = key.split(".")
    node = c
    for p in path:
        node = node[p]
    node[last] = value
    with pytest.raises(schema.ConfigError, match=match):
        stage_config(c)


def test_ints_are_accepted_where_floats_are_declared():
    assert schema.from_config_dict(RopeScaling, {"factor": 4}).factor == 4.0
    assert isinstance(schema.from_config_dict(RopeScaling, {"factor": 4}).factor, float)


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", sorted(base.RUN_SIZES))
def test_every_stage_experiment_builds_for_every_preset(stage, name):
    config = importlib.import_module(f"experiments.{stage}").get_config(name)
    run = stage_config(config)
    assert run.preset == name and run.workdir.endswith(stage)
    assert schema.describe(run)[0].startswith("preset = ")


@pytest.mark.parametrize("name", sorted(base.RUN_SIZES))
def test_the_rl_experiment_builds_for_every_preset(name):
    from composer2_jax.model_config import EXECUTION_FIELDS
    from experiments import rl

    run = rl_config(rl.get_config(name))
    # the preset's architecture; how it executes (kernel, remat, MoE dispatch) is its plan's (experiments/plans.py)
    arch = {f: getattr(preset(name), f) for f in EXECUTION_FIELDS}
    assert run.preset == name and dataclasses.replace(run.model, **arch) == preset(name)
    assert rl_config(schema.to_config_dict(run)) == run


def test_cpt_long_asks_for_its_context_and_keeps_the_models_rope():
    """cpt_long names the context it must reach; the YaRN factor is derived from the starting checkpoint at run time
    (train/init_from.extend_context, tests/test_init_from.py), so the config keeps the model's own rope section."""
    from composer2_jax.model_config import preset
    from experiments import cpt_long

    run = stage_config(cpt_long.get_config("kimi_k2_5"))
    assert run.context_length == run.data.seq_len == 262144 and run.model.attention_kernel == "ring"
    assert run.model.rope_scaling == preset("kimi_k2_5").rope_scaling


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "experiments.cpt_bulk", *argv], capture_output=True, text=True,
                          timeout=120)


def test_command_line_errors_exit_2_naming_the_key_or_value():
    r = _cli("--config.bogus=1")
    assert r.returncode == 2 and "unknown config key 'bogus'" in r.stderr and "Traceback" not in r.stderr
    r = _cli("--config.optim.lrr=1")
    assert r.returncode == 2 and "did you mean 'lr'" in r.stderr
    r = _cli("--config.steps=-5")
    assert r.returncode == 2 and "steps=-5" in r.stderr
    r = _cli("--describe", "--config.optim.lr=0.5")
    assert r.returncode == 0 and "optim.lr = 0.5  # peak learning rate" in r.stdout.splitlines()
