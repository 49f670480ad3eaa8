"""Where a stage's weights come from: `init_from` names a stage's checkpoints, a converted checkpoint or an HF
directory, and the stage starts from its weights on the stage's own mesh.

Sources (`resolve`), recognised by what the directory holds:
  stage      a training stage's orbax checkpoints (`WORKDIR/checkpoints`, or the workdir itself): params and router
             biases of the newest committed step; the model config it recorded
  converted  `python -m composer2_jax.convert import` output (checkpoint.json + model_config.json + one orbax tree
             per layer group)
  hf         an HF model directory: config.json + safetensors (bf16/fp32, FP8 block-scaled or int4 group-packed
             weights, dequantized as `convert` reads them)

The model a stage trains (`stage_model`) is the checkpoint's own architecture (its config.json or recorded model
config); the stage's model section supplies what the checkpoint does not say (dtypes, kernels, remat, MoE
execution) and changes an architecture field only where it departs explicitly from its preset
(model_config.inherit_model); every change is logged with both values. Two rules on top:
  - MTP depth grows, never shrinks, unless asked: when the stage's config wants more MTP depths than the checkpoint
    has (Kimi K2.5 ships none), the extra depths are initialised fresh as DeepSeek-V3 describes (the embedding and
    output head are the main model's, shared; the projection M_k, the block TRM_k and the norms are new); the trunk is
    untouched, so its logits are the checkpoint's. The log names the new depths.
  - Context is extended from what the checkpoint has (`extend_context`): a stage that must reach `context_length`
    keeps the checkpoint's RoPE scaling when it already reaches that far and otherwise raises YaRN's factor over the
    checkpoint's own original context (so the pretrained frequencies are extended, never remapped from another base).

Loading (`load_params`) writes each parameter straight into its sharding on the mesh. From an HF directory every
leaf is built with `jax.make_array_from_callback`: the callback of each addressable shard reads only that shard's
slice (the experts, units and rows it owns) from the memory-mapped safetensors, tensor by tensor, so no process holds
more than one source tensor beyond its own shards, and a 2 TB checkpoint is never copied to one host. A converted
checkpoint is read one layer group at a time (the group's leaves, then placed onto the mesh). A stage checkpoint is an
orbax restore into the target shardings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from composer2_jax.model_config import PRESETS, ModelConfig, RopeScaling, inherit_model, model_config
from composer2_jax.model_config import preset as model_preset
from composer2_jax.train.state import path_keys

log = logging.getLogger(__name__)

KINDS = ("stage", "converted", "hf")


@dataclasses.dataclass(frozen=True)
class InitSource:
    """A resolved `init_from`: the directory to read and what it is."""

    path: str
    kind: str  # one of KINDS


def _stage_dir(path: str) -> Optional[str]:
    """The orbax checkpoint directory of a stage at `path` (the checkpoints/ dir or its workdir), else None."""
    from composer2_jax.train.checkpoint import Checkpointer

    for d in (path, os.path.join(path, "checkpoints")):
        if os.path.isdir(d) and any(n.isdigit() for n in os.listdir(d)):
            ck = Checkpointer(d, async_save=False)
            try:
                if ck.latest_step() is not None:
                    return d
            finally:
                ck.close()
    return None


def resolve(path: str) -> InitSource:
    """What `init_from=path` names; FileNotFoundError naming the path and what was looked for."""
    from composer2_jax.convert.checkpoint import META

    if not path or not os.path.isdir(path):
        raise FileNotFoundError(f"init_from={path!r} holds no committed checkpoint: it is not a directory; expected "
                                f"a stage's checkpoints, a converted checkpoint or an HF model directory")
    path = os.path.abspath(path)  # what later stages record (their tokenizer path) must not depend on the cwd
    if os.path.isfile(os.path.join(path, META)):
        return InitSource(path, "converted")
    names = os.listdir(path)
    if "config.json" in names and any(n.endswith(".safetensors") or n.endswith(".safetensors.index.json")
                                      for n in names):
        return InitSource(path, "hf")
    stage = _stage_dir(path)
    if stage is not None:
        return InitSource(stage, "stage")
    raise FileNotFoundError(
        f"init_from={path!r} holds no committed checkpoint: expected a stage's checkpoints (numbered step "
        f"directories, here or under checkpoints/), a converted checkpoint ({META}) or an HF model directory "
        f"(config.json + *.safetensors); it holds {sorted(names)[:12]}")


def source_model(src: InitSource) -> ModelConfig:
    """The model config the checkpoint itself says (HF: architecture only; the rest at ModelConfig defaults)."""
    if src.kind == "stage":
        return recorded_model(src.path)
    if src.kind == "converted":
        from composer2_jax.convert.checkpoint import read_meta

        return read_meta(src.path)[0]
    return _hf_importer(src.path).cfg


def recorded_model(path: str) -> ModelConfig:
    """The model config a previous stage's newest checkpoint recorded (its run config's `model` section)."""
    from composer2_jax.train.checkpoint import Checkpointer

    ck = Checkpointer(path, async_save=False)
    try:
        if ck.latest_step() is None:
            raise FileNotFoundError(f"init_from={path!r} holds no committed checkpoint")
        saved = ck.saved_config()
    finally:
        ck.close()
    if "model" not in saved:
        raise ValueError(f"init_from={path!r}: its checkpoint recorded no run config with a 'model' section "
                         f"(written before configs were saved?); expected the previous stage's model config")
    return model_config(saved["model"])


@functools.lru_cache(maxsize=2)
def _hf_importer(path: str, scan_layers: bool = True):
    """The convert Importer of an HF directory: config read and every tensor header checked, nothing read yet.
    Kept for the few calls of one start (the model, then the weights), so a large checkpoint's headers are planned
    once; the path is absolute (`resolve`)."""
    from composer2_jax.convert.importer import Importer

    return Importer(path, scan_layers=scan_layers)


# ------------------------------------------------------------------------------------------------ the model


def _said_by_checkpoint(kind: str) -> tuple[str, ...]:
    """ModelConfig fields a checkpoint of this kind determines."""
    if kind == "stage":
        return tuple(f.name for f in dataclasses.fields(ModelConfig))
    from composer2_jax.convert.hf_config import ARCH_FIELDS

    return ARCH_FIELDS + ("num_mtp_layers",)


def stage_model(preset: str, model: ModelConfig, init_from: str, *, grow_mtp: bool = True,
                context_length: int = 0) -> ModelConfig:
    """The model a stage trains (module docstring); `model` is the stage's own section, `preset` its preset."""
    if init_from:
        if preset not in PRESETS:
            raise ValueError(f"preset={preset!r} names no model preset (expected one of {PRESETS}); the stage's "
                             f"explicit model overrides are the fields that differ from its preset")
        src = resolve(init_from)
        said = source_model(src)
        recorded = dataclasses.replace(model, **{k: getattr(said, k) for k in _said_by_checkpoint(src.kind)})
        base = model_preset(preset)
        cfg, changes = inherit_model(recorded, model, base)
        explicit_mtp = model.num_mtp_layers != base.num_mtp_layers
        if grow_mtp and not explicit_mtp and model.num_mtp_layers > cfg.num_mtp_layers:
            changes["num_mtp_layers"] = (cfg.num_mtp_layers, model.num_mtp_layers)
            log.info("MTP depth(s) %s are new: the %s checkpoint has %d; initialised fresh (shared embedding and head)",
                     list(range(cfg.num_mtp_layers, model.num_mtp_layers)), src.kind, cfg.num_mtp_layers)
            cfg = dataclasses.replace(cfg, num_mtp_layers=model.num_mtp_layers)
        said_s = "; ".join(f"{k}: {a!r} → {b!r}" for k, (a, b) in changes.items()) or "unchanged"
        log.info("model of %s (%s checkpoint), with this stage's explicit changes: %s", init_from, src.kind, said_s)
    else:
        cfg = model
    if context_length:
        cfg = extend_context(cfg, context_length)
    return cfg


def rope_reach(cfg: ModelConfig) -> int:
    """The context a model's RoPE is fit for: YaRN's factor × original context, else max_position_embeddings."""
    s = cfg.rope_scaling
    if s is None or s.factor <= 1.0:
        return int(cfg.max_position_embeddings if s is None else s.original_max_position_embeddings)
    return int(round(s.factor * s.original_max_position_embeddings))


def extend_context(cfg: ModelConfig, length: int) -> ModelConfig:
    """cfg able to attend over `length` tokens: unchanged when its RoPE already reaches that far; else YaRN's factor
    raised to length / original over the SAME original context (a checkpoint without YaRN: original = its
    max_position_embeddings, with DeepSeek's β_fast 32, β_slow 1, mscale 1, mscale_all_dim 1)."""
    if length <= 0:
        raise ValueError(f"context_length={length}; expected a positive number of tokens (0 = no extension)")
    reach = rope_reach(cfg)
    if reach >= length:
        log.info("context %d: the model's RoPE already reaches %d; its scaling is kept (%s)", length, reach,
                 cfg.rope_scaling)
        return dataclasses.replace(cfg, max_position_embeddings=max(cfg.max_position_embeddings, length))
    old = cfg.rope_scaling or RopeScaling(original_max_position_embeddings=int(cfg.max_position_embeddings),
                                          beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)
    new = dataclasses.replace(old, factor=float(length) / old.original_max_position_embeddings)
    log.info("context %d: YaRN extended from %s to factor %.4g over the same original %d", length, cfg.rope_scaling,
             new.factor, new.original_max_position_embeddings)
    return dataclasses.replace(cfg, rope_scaling=new, max_position_embeddings=max(cfg.max_position_embeddings, length))


TOKENIZER_FILES = ("tokenizer.json", "tiktoken.model")


def preset_default_tokenizer(preset: str):
    """The preset's own tokenizer family (what an unedited tokenizer section says); None for a preset without one."""
    from composer2_jax.data.tokenizer import PRESET_TOKENIZER, preset_tokenizer

    return preset_tokenizer(preset) if preset in PRESET_TOKENIZER else None


def stage_tokenizer(tokenizer, init_from: str, default=None):
    """The TokenizerConfig a stage uses, inherited like the model: an explicit choice (one that differs from the
    preset's `default`, or names a path) is kept; otherwise the tokenizer that came with `init_from` is used (an HF
    directory's own tokenizer.json / tiktoken.model; the tokenizer a previous stage recorded), else the configured
    one. A model family's tokenizer with no file to read is an error naming where it looked, never bytes."""
    from composer2_jax.data.tokenizer import TokenizerConfig

    explicit = tokenizer.path or (default is not None and tokenizer != default)
    inherited = None
    if init_from and not explicit:
        src = resolve(init_from)
        if src.kind == "hf" and any(os.path.isfile(os.path.join(src.path, f)) for f in TOKENIZER_FILES):
            inherited = TokenizerConfig("auto", src.path)
        elif src.kind == "stage":
            from composer2_jax.train.checkpoint import Checkpointer

            ck = Checkpointer(src.path, async_save=False)
            try:
                saved = ck.saved_config().get("tokenizer") or {}
            finally:
                ck.close()
            if saved.get("name"):
                inherited = TokenizerConfig(saved["name"], saved.get("path", ""))
    if inherited is not None:
        if inherited != tokenizer:
            log.info("tokenizer of %s: %s (the stage's config said %s)", init_from, inherited, tokenizer)
        return inherited
    if tokenizer.name != "byte" and not tokenizer.path:
        raise ValueError(f"tokenizer.name={tokenizer.name!r} has no tokenizer.path and init_from={init_from!r} brings "
                         f"no tokenizer files ({' or '.join(TOKENIZER_FILES)}); expected tokenizer.path= the model's "
                         f"tokenizer file or directory")
    return tokenizer


# ------------------------------------------------------------------------------------------------ the weights


def _key(path) -> tuple[str, ...]:
    """A tree path as a tuple of its key names."""
    return tuple(str(k) for k in path_keys(path))


def _flat(tree) -> dict[tuple[str, ...], Any]:
    return {_key(p): v for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _unflat_like(tree, values: dict[tuple[str, ...], Any]):
    paths, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return jax.tree_util.tree_unflatten(treedef, [values[_key(p)] for p, _ in paths])


def _fresh_mtp_paths(abstract_flat: dict, have_depths: int) -> set:
    """Leaves of MTP depths >= have_depths (new heads), in the ("params"|"router_state", ...) flat keys."""
    return {k for k in abstract_flat if len(k) >= 3 and k[1] == "mtp" and int(k[2].split("_")[1]) >= have_depths}


def load_params(init_from: str, abstract, model=None, seed: int = 0,
                example_shape: tuple[int, int] = (1, 8)) -> tuple[Any, Any]:
    """(params, router_state) of `init_from` in the shardings of `abstract` (a TrainState of ShapeDtypeStructs with
    shardings, as train/state.abstract_train_state gives it); MTP depths the checkpoint lacks are initialised fresh
    with `model` (its init program on tokens of `example_shape`, only the new subtrees kept) and `seed`."""
    src = resolve(init_from)
    target = {"params": abstract.params, "router_state": abstract.router_state}
    flat = _flat(target)
    have = source_model(src).num_mtp_layers
    fresh = _fresh_mtp_paths(flat, have)
    if fresh and model is None:
        raise ValueError(f"init_from={init_from!r} has {have} MTP depth(s) and the model more; pass the model to "
                         f"initialise the new ones")
    wanted = {k: v for k, v in flat.items() if k not in fresh}
    if src.kind == "stage":
        values = _load_stage(src.path, target, fresh)
    elif src.kind == "converted":
        values = _load_converted(src.path, wanted)
    else:
        values = _load_hf(src.path, wanted)
    if fresh:
        values.update(_init_fresh(model, abstract, fresh, seed, example_shape))
    missing = sorted("/".join(k) for k in flat if k not in values)
    if missing:
        raise ValueError(f"init_from={init_from!r} ({src.kind}) lacks {len(missing)} parameter(s) the model has, "
                         f"e.g. {missing[:5]}")
    out = _unflat_like(target, values)
    log.info("initialised from %s (%s checkpoint)%s", init_from, src.kind,
             f"; fresh MTP depth(s) from {have}" if fresh else "")
    return out["params"], out["router_state"]


def _load_stage(path: str, target, fresh: set) -> dict:
    """Partial orbax restore of state.params / state.router_state into the target shardings."""
    import orbax.checkpoint as ocp

    from composer2_jax.convert.checkpoint import unflatten
    from composer2_jax.train.checkpoint import Checkpointer

    def drop(tree, col):
        """tree without the fresh MTP leaves (they are not in the checkpoint)."""
        if not fresh:
            return tree
        return unflatten({"/".join(k[1:]): v for k, v in _flat({col: tree}).items() if k not in fresh})

    item = {"params": drop(target["params"], "params"), "router_state": drop(target["router_state"], "router_state")}
    ck = Checkpointer(path, async_save=False)
    try:
        step = ck.latest_step()
        restored = ck.manager.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
            item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_restore=True)))
    finally:
        ck.close()
    log.info("stage checkpoint %s step %d", path, step)
    return _flat({"params": restored["state"]["params"], "router_state": restored["state"]["router_state"]})


def _init_fresh(model, abstract, fresh: set, seed: int, example_shape: tuple[int, int]) -> dict:
    """The new MTP subtrees from the model's own init program (XLA keeps only what is returned)."""
    from flax import linen as nn

    from composer2_jax.sharding import activate

    shapes = _flat({"params": abstract.params, "router_state": abstract.router_state})
    keys = sorted(fresh)
    shardings = [shapes[k].sharding for k in keys]
    tokens = jnp.zeros(example_shape, jnp.int32)

    def init(r):
        v = _flat(nn.unbox(model.init(r, tokens)))
        return [v[k].astype(shapes[k].dtype) for k in keys]

    with activate(model.mesh) if getattr(model, "mesh", None) is not None else contextlib.nullcontext():
        out = jax.jit(init, out_shardings=shardings)(jax.random.key(seed))
    return dict(zip(keys, out))


def _place(value_of: Callable[[tuple], np.ndarray], like) -> jax.Array:
    """A global array shaped and sharded like `like` whose shards are read by `value_of(index)` (only the
    addressable ones, each once per distinct index)."""
    cache: dict = {}

    def cb(index):
        key = tuple((s.start, s.stop, s.step) for s in index)
        if key not in cache:
            cache[key] = np.asarray(value_of(index), dtype=like.dtype)
        return cache[key]

    return jax.make_array_from_callback(like.shape, like.sharding, cb)


def _leaf_targets(cfg: ModelConfig, groups) -> dict[tuple[str, ...], list]:
    """{flat target key: [(group, leaf) per unit row, or one]} for every source leaf of the mapping's groups."""
    from composer2_jax.model.layer_plan import SCANNED_STACK, layer_name, unit_name

    out: dict[tuple[str, ...], list] = {}
    for g in groups:
        for leaf in g.leaves:
            col = (leaf.collection,)
            if g.kind == "globals":
                key = col + leaf.path
            elif g.kind == "layer":
                key = col + (layer_name(g.index),) + leaf.path
            elif g.kind == "mtp":
                key = col + ("mtp", f"mtp_{g.index}") + leaf.path
            elif cfg.scan_layers:
                key = col + (SCANNED_STACK,) + leaf.path
            else:
                key = col + (unit_name(g.index),) + leaf.path
            out.setdefault(key, []).append((g, leaf))
    return out


def _load_hf(path: str, wanted: dict) -> dict:
    """Every wanted leaf from an HF directory, each shard reading only its own slice of the source tensors."""
    from composer2_jax.convert.hf_source import CheckpointError

    imp = _hf_importer(path)
    src = imp.src
    scanned = any(k[1] == "stack" for k in wanted)
    cfg = dataclasses.replace(imp.cfg, scan_layers=scanned)
    from composer2_jax.convert.mapping import groups as mapping_groups

    targets = _leaf_targets(cfg, mapping_groups(cfg, src.prefix, src.head))
    out = {}
    for key, like in wanted.items():
        found = targets.get(key)
        if found is None:
            continue
        stacked = len(found) > 1 or (found[0][0].kind == "unit" and cfg.scan_layers)
        want = like.shape[1:] if stacked else like.shape
        if tuple(found[0][1].shape) != tuple(want):
            raise CheckpointError(f"{'/'.join(key)}: the checkpoint's {found[0][1].hf} gives shape "
                                  f"{list(found[0][1].shape)}; the model expects {list(want)}")

        if not stacked:
            out[key] = _place(lambda index, leaf=found[0][1], dt=like.dtype: _read_slice(src, leaf, index, dt), like)
            continue
        # a scanned stack is placed one unit row at a time: host memory holds one row's shards, not the leaf's
        stack = jax.jit(lambda like=like: jnp.zeros(like.shape, like.dtype), out_shardings=like.sharding)()
        row_like = _row_like(like)
        for u, (_, leaf) in enumerate(found):
            row = _place(lambda index, leaf=leaf, dt=like.dtype: _read_slice(src, leaf, index, dt), row_like)
            stack = _set_row(stack, jnp.int32(u), row)
        out[key] = stack
    src.__dict__.pop("_last_linear", None)  # the importer is kept (lru_cache); its last dequantized tensor is not
    return out


def _read_slice(src, leaf, index: tuple, dtype) -> np.ndarray:
    """leaf's value (our layout) at `index`, reading only what the slice needs (experts: only its experts)."""
    dtype = np.dtype(dtype)
    if leaf.kind in ("vector", "embed"):
        return np.asarray(src.st.get(leaf.hf)[index], dtype=dtype)
    if leaf.kind == "linear":
        return _linear_ours(src, leaf)[index].astype(dtype)
    experts = range(leaf.shape[0])[index[0]] if index else range(leaf.shape[0])
    rest = index[1:]
    if src.fused.get(leaf.hf, f"{leaf.hf}.gate_up_proj" in src.st):
        return np.stack([_fused_expert(src, leaf, j)[rest] for j in experts]).astype(dtype)
    return np.stack([np.ascontiguousarray(src.linear_OI(leaf.expert_name(j)[: -len(".weight")], leaf.hf_shape,
                                                        np.float32).T)[rest] for j in experts]).astype(dtype)


def _linear_ours(src, leaf) -> np.ndarray:
    """A Linear leaf in our layout (fp32), dequantized once for all the device shards that slice it: the last one
    read is kept (one source tensor), since make_array_from_callback asks for a leaf's shards one after another."""
    cache = src.__dict__.setdefault("_last_linear", {})
    if leaf.hf not in cache:
        cache.clear()
        w = src.linear_OI(leaf.hf, leaf.hf_shape, np.float32)
        cache[leaf.hf] = np.ascontiguousarray(w.T).reshape(leaf.shape)
    return cache[leaf.hf]


def _fused_expert(src, leaf, j: int) -> np.ndarray:
    """Expert j of a transformers-5 fused expert tensor, in our [in, out] layout."""
    if leaf.proj == "down_proj":  # [E, D, F] → [F, D]
        return np.asarray(src.st.get(f"{leaf.hf}.down_proj")[j], np.float32).T
    f = leaf.shape[2]
    gu = src.st.get(f"{leaf.hf}.gate_up_proj")[j]  # [2F, D], gate rows first
    part = gu[:f] if leaf.proj == "gate_proj" else gu[f:]
    return np.asarray(part, np.float32).T


def _load_converted(path: str, wanted: dict) -> dict:
    """Every wanted leaf from a converted checkpoint, one layer group in host memory at a time: a scanned stack is
    allocated on the mesh and each unit's rows are written into it as its group is read."""
    from composer2_jax.convert.checkpoint import flatten, group_names, read_meta, restore_group
    from composer2_jax.model.layer_plan import SCANNED_STACK, unit_name

    cfg, _ = read_meta(path)
    scanned = any(k[1] == SCANNED_STACK for k in wanted)
    out = {}
    for name in group_names(cfg):
        tree = restore_group(path, name)
        for flat_key, value in flatten(tree).items():
            col, *rest = flat_key.split("/")
            row = None
            if name == "globals":
                key = (col, *rest)
            elif name.startswith("mtp_"):
                key = (col, "mtp", name, *rest)
            elif name.startswith("unit_") and scanned:
                key, row = (col, SCANNED_STACK, *rest), int(name.split("_")[1])
            elif name.startswith("unit_"):
                key = (col, unit_name(int(name.split("_")[1])), *rest)
            else:
                key = (col, name, *rest)
            if key not in wanted:
                continue
            like = wanted[key]
            if row is None:
                out[key] = _place_host(value, like, "/".join(key))
                continue
            if key not in out:
                out[key] = jax.jit(lambda: jnp.zeros(like.shape, like.dtype), out_shardings=like.sharding)()
            out[key] = _set_row(out[key], jnp.int32(row), _place_host(value, _row_like(like), "/".join(key)))
        del tree
    return out


def _row_like(like) -> jax.ShapeDtypeStruct:
    """One row of a stacked leaf: its shape and the stack's sharding without the leading axis."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    spec = tuple(like.sharding.spec) + (None,) * (len(like.shape) - len(like.sharding.spec))
    return jax.ShapeDtypeStruct(like.shape[1:], like.dtype, sharding=NamedSharding(like.sharding.mesh, P(*spec[1:])))


def _update_row(stack, row, value):
    """stack[row] = value (its buffer donated by `_set_row`)."""
    return jax.lax.dynamic_update_index_in_dim(stack, value, row, 0)


_set_row = jax.jit(_update_row, donate_argnums=0)


def _place_host(value: np.ndarray, like, name: str) -> jax.Array:
    """A host array placed onto like's sharding (each shard copies its slice)."""
    if tuple(value.shape) != tuple(like.shape):
        raise ValueError(f"converted checkpoint leaf {name} has shape {list(value.shape)}; the model expects "
                         f"{list(like.shape)}")
    return _place(lambda index: value[index], like)
