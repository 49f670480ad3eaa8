"""Converted checkpoint → HF DeepseekV3ForCausalLM safetensors (sharded, per-expert tensors) + config.json.

Streaming: the tensor list (names, shapes, dtypes) is planned from checkpoint.json alone, the shard files are laid
out from it, and then each group is restored, converted tensor by tensor and appended to the open shard.
Peak host memory: one group. With `dtype="auto"` every tensor is written in the dtype its source had (recorded
at import), so import → export reproduces a float checkpoint byte for byte; quantized sources come back
dequantized (float32 unless `dtype` says otherwise), never re-quantized.
"""

from __future__ import annotations

import logging
import os
from typing import Iterator

import numpy as np

from composer2_jax.convert import hf_config
from composer2_jax.convert.checkpoint import flatten, read_meta, restore_group
from composer2_jax.convert.hf_source import NP_DTYPES
from composer2_jax.convert.mapping import Group, Leaf, groups
from composer2_jax.convert.safetensors_io import ShardedWriter

log = logging.getLogger(__name__)
EXPORT_DTYPES = ("auto", "float32", "bfloat16", "float16")
DEFAULT_SHARD_BYTES = 5 * 2**30
HEAD = "lm_head"


def hf_tensors(leaf: Leaf, value: np.ndarray, dtype) -> Iterator[tuple[str, np.ndarray]]:
    """A leaf's value → its HF tensors ([out, in] Linear weights; one tensor per expert)."""
    if leaf.kind in ("vector", "embed"):
        yield leaf.hf, value.astype(dtype, copy=False)
        return
    o, i = leaf.hf_shape
    if leaf.kind == "linear":
        yield f"{leaf.hf}.weight", value.reshape(i, o).T.astype(dtype)
        return
    for j in range(leaf.shape[0]):
        yield leaf.expert_name(j), value[j].reshape(i, o).T.astype(dtype)


def _hf_entries(leaf: Leaf, dtype) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    if leaf.kind in ("vector", "embed"):
        return [(leaf.hf, leaf.shape, dtype)]
    if leaf.kind == "linear":
        return [(f"{leaf.hf}.weight", leaf.hf_shape, dtype)]
    return [(leaf.expert_name(j), leaf.hf_shape, dtype) for j in range(leaf.shape[0])]


class _Plan:
    """Which leaves each group writes, with their export dtypes."""

    def __init__(self, cfg, meta: dict, dtype: str):
        self.source = meta.get("source", {})
        self.groups: list[Group] = groups(cfg, "model.", HEAD)
        self.items: list[tuple[Group, list[tuple[Leaf, str, np.dtype]]]] = []
        stored = meta["groups"]
        for g in self.groups:
            rows = []
            for leaf in g.leaves:
                key = f"{leaf.collection}/" + "/".join(leaf.path)
                rows.append((leaf, key, self._dtype(dtype, g.name, key, stored[g.name][key][0])))
            for leaf in g.optional:  # MTP embedding/head: kept in the group, or a dropped copy of the main one
                key = "params/" + leaf.path[0]
                if key in stored[g.name]:
                    rows.append((leaf, key, self._dtype(dtype, g.name, key, stored[g.name][key][0])))
                elif self.source.get("mtp_shared", {}).get(f"{g.name}/{leaf.path[0]}"):
                    main = "params/embedding" if leaf.path == ("embedding",) else "params/lm_head"
                    rows.append((leaf, "shared:" + main,
                                 self._dtype(dtype, "globals", main, stored["globals"][main][0])))
            self.items.append((g, rows))

    def _dtype(self, dtype: str, group: str, key: str, current: str) -> np.dtype:
        if dtype == "auto":
            return NP_DTYPES[self.source.get("dtypes", {}).get(f"{group}/{key}", current)]
        return NP_DTYPES[dtype]

    def entries(self):
        return [e for _, rows in self.items for leaf, _, dt in rows for e in _hf_entries(leaf, dt)]


def export_hf(ckpt: str, out_dir: str, *, dtype: str = "auto", max_shard_bytes: int = DEFAULT_SHARD_BYTES,
              overwrite: bool = False) -> str:
    """Write the checkpoint at `ckpt` as an HF safetensors directory; returns out_dir."""
    if dtype not in EXPORT_DTYPES:
        raise ValueError(f"dtype={dtype!r}; expected one of {EXPORT_DTYPES}")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not overwrite:
        raise FileExistsError(f"{out_dir} is not empty; pass overwrite=True (--overwrite)")
    cfg, meta = read_meta(ckpt)
    plan = _Plan(cfg, meta, dtype)
    writer = ShardedWriter(out_dir, plan.entries(), max_shard_bytes)
    for g, rows in plan.items:
        flat = flatten(restore_group(ckpt, g.name))
        shared = flatten(restore_group(ckpt, "globals")) if any(k.startswith("shared:") for _, k, _ in rows) else {}
        for leaf, key, dt in rows:
            value = shared[key[len("shared:"):]] if key.startswith("shared:") else flat[key]
            for name, arr in hf_tensors(leaf, value, dt):
                writer.put(name, arr)
        del flat, shared
        log.info("exported %s", g.name)
    writer.finish()
    hf_config.write_hf_config(cfg, out_dir, extra=_carried_keys(meta.get("source", {}), dtype, cfg))
    return out_dir


def _carried_keys(source: dict, dtype: str, cfg) -> dict:
    """Token ids and the storage dtype carried over from the source config.json (architecture comes from cfg)."""
    src = source.get("hf_config") or {}
    text = hf_config.text_config(src) if src else {}
    extra = {k: text.get(k, src.get(k)) for k in ("bos_token_id", "eos_token_id", "pad_token_id")
             if text.get(k, src.get(k)) is not None}
    stored = text.get("torch_dtype", text.get("dtype", src.get("torch_dtype", src.get("dtype"))))
    extra["torch_dtype"] = dtype if dtype != "auto" else (stored if stored in NP_DTYPES else cfg.param_dtype)
    return extra
