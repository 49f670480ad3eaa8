"""model.moe_overlap_chunks (issue 22 item 5): C chunks per MoE layer, software-pipelined so one chunk's expert
all-to-all can overlap another chunk's expert FFN.

  * exactness on 8 CPU devices: expert=8 and fsdp=2 × expert=4, C = 2 and 4 equal C = 1 (values, routing, load,
    balance loss, entropy, gradients) at tests/tolerances.py SHARDED_FP32; and a pipelined train step
    (stage=2 with fsdp and expert inside) with C = 2 equals C = 1;
  * capacity mode: each chunk is its own GShard dispatch group (per-chunk slots), C = 1 unchanged; with C > 1 the
    dropped assignments are the overflow of each chunk, checked token by token;
  * the compiled program (composer2_jax/plan/hlo.py): with C >= 2 no chunk's all-to-all depends on another
    chunk's expert matmul or the other way round, in the forward and the backward; the checker does flag a
    program where one does;
  * the option's validation names the bad value and what is expected.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from composer2_jax.model.expert_parallel import capacity
from composer2_jax.model.moe import MoE
from composer2_jax.model_config import get_model_config
from composer2_jax.plan.hlo import moe_overlap, schedule_summary
from tests.test_moe_expert_parallel import _assert_tree_close, _on_mesh
from tests.test_moe_layer import init_moe, naive_moe
from tests.tolerances import FP32_BLOCK, SHARDED_FP32

B, T = 8, 8  # 8 tokens per shard on 8 devices: C = 2 and 4 divide them
MESHES = {"expert8": dict(expert=8), "fsdp2_expert4": dict(fsdp=2, expert=4)}


@functools.lru_cache(maxsize=None)
def _data():
    r = np.random.default_rng(7)
    cfg = get_model_config("toy")
    x = r.normal(size=(B, T, cfg.hidden_size)).astype(np.float32)
    ct = r.normal(size=x.shape).astype(np.float32)
    return x, ct, init_moe(cfg, x)


def _cfg(chunks, **kw):
    return get_model_config("toy", moe_overlap_chunks=chunks, **kw)


def _loss(cfg, v, mesh, replay=None):
    x, ct, _ = _data()

    def loss(params, x):
        y, aux = MoE(cfg, mesh).apply(dict(v, params=params), x, None, replay)
        return jnp.sum(y * ct) + 0.1 * aux["balance_loss"], (y, aux)

    return jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)


@functools.lru_cache(maxsize=None)
def _run(mesh_name, chunks, moe_impl="dropless", factor=1.25):
    """(y, aux, grads) of the MoE layer on a mesh, jitted."""
    x, _, v = _data()
    cfg = _cfg(chunks, moe_impl=moe_impl, moe_capacity_factor=factor)
    with _on_mesh(MESHES[mesh_name]) as m:
        (_, (y, aux)), g = jax.jit(_loss(cfg, v, m))(v["params"], x)
    return jax.device_get((y, aux, g))


@pytest.mark.parametrize("chunks", [2, 4])
@pytest.mark.parametrize("mesh", list(MESHES))
def test_chunked_moe_equals_unchunked(mesh, chunks):
    y0, aux0, g0 = _run(mesh, 1)
    y1, aux1, g1 = _run(mesh, chunks)
    np.testing.assert_allclose(y1, y0, **SHARDED_FP32)
    np.testing.assert_array_equal(aux1["indices"], aux0["indices"])
    np.testing.assert_array_equal(aux1["load"], aux0["load"])
    assert float(aux1["dropped"]) == float(aux0["dropped"]) == 0.0
    for key in ("balance_loss", "entropy"):
        np.testing.assert_allclose(aux1[key], aux0[key], **SHARDED_FP32, err_msg=key)
    _assert_tree_close(g1, g0, SHARDED_FP32)


def test_chunked_capacity_mode_without_drops_equals_unchunked():
    """Capacity covering every chunk's worst case (factor E/k: C_c = every token of the chunk): no drops, and the
    same values and gradients as C = 1."""
    e_over_k = 8 / 2
    y0, aux0, g0 = _run("expert8", 1, "capacity", e_over_k)
    y1, aux1, g1 = _run("expert8", 2, "capacity", e_over_k)
    assert float(aux0["dropped"]) == float(aux1["dropped"]) == 0.0
    np.testing.assert_allclose(y1, y0, **SHARDED_FP32)
    _assert_tree_close(g1, g0, SHARDED_FP32)


@pytest.mark.parametrize("chunks", [1, 2, 4])
def test_capacity_is_per_chunk(chunks):
    """Every token to experts 0 and 1 (expert 0 overflows): each shard holds one sequence of T = 8 tokens, each
    chunk of T/C tokens gives every expert C_c = ceil(1.0 · (T/C)·k / E) slots, so the first C_c tokens of every
    chunk keep both experts and the rest lose both. C = 1: C_c = 2 (tokens 0, 1); C = 2: C_c = 1 (tokens 0, 4);
    C = 4: C_c = 1 (tokens 0, 2, 4, 6) — per chunk the slots round up, so more assignments are kept."""
    x, _, v = _data()
    cfg = _cfg(chunks, moe_impl="capacity", moe_capacity_factor=1.0)
    k, e = cfg.num_experts_per_tok, cfg.n_routed_experts
    per_chunk = T // chunks
    slots = capacity(per_chunk, k, e, 1.0)
    forced = jnp.broadcast_to(jnp.arange(k, dtype=jnp.int32), (B, T, k))
    with _on_mesh(MESHES["expert8"]) as m:
        y, aux = jax.jit(lambda x: MoE(cfg, m).apply(v, x, None, forced))(x)
    kept = np.zeros((B, T, k), bool)
    for c in range(chunks):
        kept[:, c * per_chunk: c * per_chunk + slots] = True
    ref, _ = naive_moe(v, x, cfg, idx=np.asarray(forced), kept=kept.reshape(B * T, k))
    np.testing.assert_allclose(np.asarray(y).reshape(ref.shape), ref, **FP32_BLOCK)
    dropped = B * (T - chunks * slots) * k
    assert aux["dropped"] == np.float32(dropped) / np.float32(B * T * k)
    assert {1: 6, 2: 6, 4: 4}[chunks] == T - chunks * slots  # tokens per sequence that lose both experts


def test_compiled_program_has_no_cross_chunk_dependence():
    """The compiled forward + backward with C = 2 and C = 4: every all-to-all is attributed to a chunk, and no
    all-to-all of chunk i depends on (or feeds) an expert matmul of chunk j != i at the same site (layer, pass)."""
    x, _, v = _data()
    for chunks in (2, 4):
        with _on_mesh(MESHES["expert8"]) as m:
            text = jax.jit(_loss(_cfg(chunks), v, m)).lower(v["params"], x).compile().as_text()
        rep = moe_overlap(text)
        assert rep["chunks"] == list(range(chunks))
        assert rep["independent"], rep["dependent"][:5]
        assert rep["pairs_checked"] >= 2 * chunks * (chunks - 1)  # forward and backward, both a2a directions
        summary = schedule_summary(rep)
        assert set(summary) == {"forward/dispatch", "forward/combine", "backward/dispatch", "backward/combine"}
        fwd = next(o for k, o in rep["order"].items() if "transpose(" not in k)
        for i in range(1, chunks):  # chunk i's dispatch all-to-all is issued before chunk i-1's expert matmuls
            assert fwd.index(f"A{i}d") < fwd.index(f"E{i - 1}"), fwd


def test_checker_flags_a_cross_chunk_dependence():
    """A program where chunk 1's all-to-all consumes chunk 0's expert matmul is reported as dependent."""
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))

    def body(a, w):
        with jax.named_scope("moe_chunk0"), jax.named_scope("experts"):
            h0 = a @ w
        with jax.named_scope("moe_chunk1"), jax.named_scope("dispatch"):
            s1 = jax.lax.all_to_all(h0 * 2.0, "x", 0, 0, tiled=True)  # the bad dependence
        with jax.named_scope("moe_chunk1"), jax.named_scope("experts"):
            h1 = s1 @ w
        return h1

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x")))
    text = f.lower(jnp.ones((64, 16)), jnp.ones((16, 16))).compile().as_text()
    rep = moe_overlap(text)
    assert not rep["independent"]
    assert any(kind == "a2a_needs_dot" for _, _, kind in rep["dependent"])


def test_pipelined_step_with_chunks_equals_unchunked():
    """stage=2 with fsdp=2 × expert=2 inside the stage: the whole pipelined train step with C = 2 equals C = 1."""
    from tests.test_pipeline_parallel import _cfg as pp_cfg
    from tests.test_pipeline_parallel import _run as pp_run

    mesh = dict(stage=2, fsdp=2, expert=2)
    ref_m, ref_p, _ = pp_run(pp_cfg(pipeline_repeats=2, remat_policy="full"), mesh)
    m, p, _ = pp_run(pp_cfg(pipeline_repeats=2, remat_policy="full", moe_overlap_chunks=2), mesh)
    for key in ("loss", "ce", "grad_norm", "balance_loss", "moe_load"):
        np.testing.assert_allclose(m[key], ref_m[key], **SHARDED_FP32, err_msg=key)
    _assert_tree_close(p, ref_p, SHARDED_FP32)


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True])
def test_bad_chunk_count_is_rejected(bad):
    with pytest.raises(ValueError, match=r"model.moe_overlap_chunks must be an int >= 1 \(1 = no chunking\), got"):
        _cfg(bad)


def test_chunks_that_do_not_divide_the_shard_tokens_are_an_error():
    x, _, v = _data()
    cfg = _cfg(3)
    with _on_mesh(MESHES["expert8"]) as m, pytest.raises(
            ValueError, match=r"model.moe_overlap_chunks=3 does not divide the 8 tokens each MoE shard holds "
                              r"\(1 sequences × 8 positions\); expected a divisor of 8 \(one of \[1, 2, 4, 8\]\)"):
        jax.eval_shape(lambda x: MoE(cfg, m).apply(v, x), x)


def test_default_is_one_chunk():
    assert get_model_config("toy").moe_overlap_chunks == 1
    assert dataclasses.replace(get_model_config("toy"), moe_overlap_chunks=2).moe_overlap_chunks == 2
