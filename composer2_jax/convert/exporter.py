"""Converted checkpoint or a training stage's checkpoint → HF DeepseekV3ForCausalLM safetensors (sharded,
per-expert tensors) + config.json (+ the stage's tokenizer files), written as OUT.partial and renamed when complete.

Streaming: the tensor list (names, shapes, dtypes) is planned from checkpoint.json alone, the shard files are laid
out from it, and then each group is restored, converted tensor by tensor and appended to the open shard.
Peak host memory: one group for a converted checkpoint; the parameters once for a stage checkpoint (stage.py
restores them as host arrays; its groups are views of them). With `dtype="auto"` every tensor is written in the
dtype its source had (recorded at import), so import → export reproduces a float checkpoint byte for byte;
quantized sources come back dequantized (float32 unless `dtype` says otherwise), never re-quantized. A stage's
tensors are written in their stored (master-weight) dtype.
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Iterator, Optional

import numpy as np

from composer2_jax.convert import hf_config, stage
from composer2_jax.convert.checkpoint import META, flatten, read_meta, restore_group
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


class ConvertedSource:
    """A converted checkpoint (checkpoint.json + one orbax PyTree per group), read one group at a time."""

    kind = "converted"

    def __init__(self, path: str):
        self.path = path
        self.cfg, self.meta = read_meta(path)

    def load(self):
        """Nothing to do: groups are restored one at a time by `group`."""

    def group(self, name: str) -> dict:
        return restore_group(self.path, name)


def open_source(ckpt: str, step: Optional[int] = None):
    """The export source at `ckpt`: a converted checkpoint, or a training stage's checkpoints (workdir,
    checkpoints/ directory or one step directory; `step` picks a committed step, default the newest)."""
    if os.path.isfile(os.path.join(ckpt, META)):
        if step is not None:
            raise ValueError(f"--step {step}: {ckpt} is a converted checkpoint (one step); --step picks a step of a "
                             f"training stage's checkpoints")
        return ConvertedSource(ckpt)
    return stage.StageSource(ckpt, step)


def _tokenizer_plan(src, tokenizer: Optional[str]) -> tuple[Optional[str], dict]:
    """(directory to copy tokenizer files from or None, token ids for config.json); every error before writing."""
    if tokenizer:
        directory = stage.tokenizer_dir(tokenizer, "--tokenizer")
        tiktoken = os.path.isfile(os.path.join(directory, "tiktoken.model"))
        return directory, stage.token_ids("tiktoken", directory) if tiktoken else {}
    if src.kind != "stage":
        log.info("converted checkpoint: no tokenizer recorded, none copied (pass --tokenizer DIR to add one)")
        return None, {}
    tok = src.tokenizer()
    if tok["name"] == "byte":
        log.info("the stage used the byte tokenizer (ids 0-255 are bytes, specials above): no tokenizer files to "
                 "copy")
        return None, stage.token_ids("byte", "")
    directory = stage.tokenizer_dir(tok["path"], f"the stage's recorded tokenizer.path ({tok['name']})")
    return directory, stage.token_ids(tok["name"], tok["path"])


def export_hf(ckpt: str, out_dir: str, *, dtype: str = "auto", max_shard_bytes: int = DEFAULT_SHARD_BYTES,
              overwrite: bool = False, step: Optional[int] = None, tokenizer: Optional[str] = None) -> str:
    """Write the checkpoint at `ckpt` as an HF safetensors directory; returns out_dir.

    `ckpt`: a converted checkpoint, or a training stage's workdir / checkpoints/ directory / step directory (`step`
    picks a committed step, default the newest). The directory is written as OUT.partial and renamed when
    complete: a failed export leaves nothing at OUT (and removes OUT.partial). Tokenizer files are copied from
    `tokenizer` or from the stage's recorded tokenizer.path.
    """
    if dtype not in EXPORT_DTYPES:
        raise ValueError(f"dtype={dtype!r}; expected one of {EXPORT_DTYPES}")
    out = os.path.abspath(out_dir)
    if os.path.exists(out) and not overwrite and (not os.path.isdir(out) or os.listdir(out)):
        raise FileExistsError(f"{out_dir} exists and is not empty; pass overwrite=True (--overwrite)")
    src = open_source(ckpt, step)
    tok_dir, ids = _tokenizer_plan(src, tokenizer)  # a tokenizer error comes before any array is read
    src.load()
    if src.cfg.moe_layer_freq != 1:
        log.warning("model.moe_layer_freq=%d: config.json records it (DeepSeek's remote code and vLLM read it), but "
                    "transformers' built-in DeepseekV3ForCausalLM ignores it and would build MoE blocks in every layer "
                    "from first_k_dense_replace on", src.cfg.moe_layer_freq)
    plan = _Plan(src.cfg, src.meta, dtype)
    tmp = out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        writer = ShardedWriter(tmp, plan.entries(), max_shard_bytes)
        for g, rows in plan.items:
            flat = flatten(src.group(g.name))
            shared = flatten(src.group("globals")) if any(k.startswith("shared:") for _, k, _ in rows) else {}
            for leaf, key, dt in rows:
                value = shared[key[len("shared:"):]] if key.startswith("shared:") else flat[key]
                for name, arr in hf_tensors(leaf, value, dt):
                    writer.put(name, arr)
            del flat, shared
            log.info("exported %s", g.name)
        writer.finish()
        extra = _carried_keys(src.meta.get("source", {}), dtype, src.cfg)
        for k, v in ids.items():  # the source config.json's ids win; a stage has none
            extra.setdefault(k, v)
        hf_config.write_hf_config(src.cfg, tmp, extra=extra)
        if tok_dir is not None:
            log.info("copied tokenizer files %s from %s", stage.copy_tokenizer(tok_dir, tmp), tok_dir)
        if os.path.lexists(out):
            shutil.rmtree(out) if os.path.isdir(out) and not os.path.islink(out) else os.remove(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
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
