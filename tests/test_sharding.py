"""Mesh construction (incl. the multi-slice layout), the rules table, start-up divisibility errors naming both
numbers."""

import types

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from composer2_jax import sharding as shd
from composer2_jax.model_config import get_model_config


def test_make_mesh_axes_sizes_and_auto_types():
    mesh = shd.make_mesh(dict(data=2, expert=4))
    assert mesh.axis_names == shd.MESH_AXES
    assert dict(mesh.shape) == dict(stage=1, data=2, fsdp=1, expert=4, tensor=1, context=1)
    assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)
    assert dict(shd.make_mesh(shd.MeshConfig(expert=2)).shape)["fsdp"] == 4  # fsdp=-1 takes the rest
    sub = shd.make_mesh(dict(expert=4), devices=jax.devices()[:4])
    assert sub.devices.size == 4


def test_mesh_errors_name_the_values():
    with pytest.raises(ValueError, match=r"has 6 devices, but 8 are available"):
        shd.make_mesh(dict(data=2, expert=3))
    with pytest.raises(ValueError, match=r"unknown mesh axes \['experts'\]"):
        shd.make_mesh(dict(experts=8))
    with pytest.raises(ValueError, match=r"fixed axes multiply to 3, which does not divide 8"):
        shd.make_mesh(shd.MeshConfig(expert=3))


def test_rules_table_maps_model_axes():
    assert shd.logical_to_spec(("activation_batch", "activation_length", "activation_embed")) == \
        P(("stage", "data", "fsdp", "expert"), "context", None)
    assert shd.logical_to_spec(("exp", "embed", "moe_mlp")) == P("expert", ("fsdp", "context"), "tensor")
    assert shd.mesh_axes_of("exp") == ("expert",) and shd.mesh_axes_of("kv") == ()
    # MLA's latent dims are FSDP-sharded (W_qb, W_kvb have no embed dim); W_qa keeps embed on fsdp, the latent whole
    assert shd.logical_to_spec(("q_lora", "heads", "kv")) == P(("fsdp", "context"), "tensor", None)
    assert shd.logical_to_spec(("embed", "q_lora")) == P(("fsdp", "context"), None)
    names = [n for n, _ in shd.LOGICAL_RULES]
    assert len(names) == len(set(names)), "one rule per logical name"


def test_multi_slice_puts_data_on_dcn():
    """Fake devices in 2 slices of 4: the data axis's outer half is slice 0, its inner half slice 1."""
    devs = [types.SimpleNamespace(id=i, slice_index=i // 4, process_index=i // 4, platform="cpu", device_kind="cpu")
            for i in range(8)]
    grid = shd.device_grid((1, 2, 2, 2, 1, 1), devs)
    slices = np.vectorize(lambda d: d.slice_index)(grid)
    assert (slices[0, 0] == 0).all() and (slices[0, 1] == 1).all()
    assert shd.num_slices(devs) == 2 and shd.num_slices(jax.devices()) == 1
    with pytest.raises(ValueError, match=r"span 2 slices; mesh axis stage=1 covers 1 of them, so data=1 must be a "
                                         r"multiple of the remaining 2"):
        shd.device_grid((1, 1, 2, 4, 1, 1), devs)


def test_multi_slice_puts_pipeline_stages_on_dcn_first():
    """2 slices of 4 and stage=2: each pipeline stage is one slice; data stays inside a slice."""
    devs = [types.SimpleNamespace(id=i, slice_index=i // 4, process_index=i // 4, platform="cpu", device_kind="cpu")
            for i in range(8)]
    grid = shd.device_grid((2, 2, 2, 1, 1, 1), devs)
    slices = np.vectorize(lambda d: d.slice_index)(grid)
    assert (slices[0] == 0).all() and (slices[1] == 1).all()
    mesh = shd.make_mesh(dict(stage=2, fsdp=4))
    assert dict(mesh.shape)["stage"] == 2
    assert shd.logical_to_spec(("layers", "embed")) == P("stage", ("fsdp", "context"))


@pytest.mark.parametrize("mesh_shape, kw, batch, seq, message", [
    (dict(expert=8), dict(n_routed_experts=12, n_group=1), 8, 16,
     r"model.n_routed_experts=12 is not divisible by mesh axes expert=8 \(= 8\)"),
    (dict(expert=2, tensor=4), dict(num_heads=2, hidden_size=64), 8, 16,
     r"model.num_heads=2 is not divisible by mesh axes tensor=4 \(= 4\)"),
    (dict(expert=4, context=2), {}, 8, 15, r"seq_len=15 is not divisible by mesh axes context=2 \(= 2\)"),
    (dict(data=2, fsdp=2, expert=2), {}, 6, 16,
     r"global batch=6 is not divisible by mesh axes data=2×fsdp=2×expert=2 \(= 8\)"),
])
def test_validate_model_mesh_names_both_numbers(mesh_shape, kw, batch, seq, message):
    cfg = get_model_config("toy", **kw)
    mesh = shd.make_mesh(mesh_shape)
    with pytest.raises(ValueError, match=message):
        shd.validate_model_mesh(cfg, mesh, batch, seq)


def test_validate_model_mesh_accepts_a_good_layout_and_abstract_meshes():
    cfg = get_model_config("toy")
    shd.validate_model_mesh(cfg, shd.make_mesh(dict(data=2, expert=4)), 8, 16)
    kimi = get_model_config("kimi_k2_5")
    big = jax.sharding.AbstractMesh((1, 4, 8, 48, 4, 2), shd.MESH_AXES)  # 12,288 devices, never materialised
    shd.validate_model_mesh(kimi, big, batch=4 * 8 * 48, seq_len=32768)


def test_check_divisible_names_both_numbers():
    with pytest.raises(ValueError, match=r"dimension 0 of size 6 is sharded over mesh axes expert of total size 4"):
        shd.check_divisible("w", (6, 3), P("expert"), shd.make_mesh(dict(expert=4, fsdp=2)))
