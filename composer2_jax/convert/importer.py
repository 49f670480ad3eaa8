"""HF safetensors checkpoint → our parameter trees (in memory) or a converted checkpoint on disk, group by group.

Dtypes (`dtype`): "auto" keeps each float tensor's stored dtype and dequantizes FP8/int4 weights to float32;
"float32"/"bfloat16" cast everything. The router weight and its bias are always float32 (as the model declares
them). Whenever a leaf's dtype differs from its stored float dtype, `source.dtypes` records the stored one, so
that `export --dtype auto` writes the original bytes back.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Iterator, Optional

import numpy as np

from composer2_jax.convert import hf_config
from composer2_jax.convert.checkpoint import CheckpointWriter, assemble, flatten, unflatten
from composer2_jax.convert.hf_source import DTYPE_NAMES, NP_DTYPES, CheckpointError, HFSource
from composer2_jax.convert.mapping import Group, Leaf, groups, mtp_shared_source
from composer2_jax.model_config import ModelConfig, model_config

log = logging.getLogger(__name__)
IMPORT_DTYPES = ("auto", "float32", "bfloat16")


class Importer:
    """Plans an HF checkpoint (config + every tensor header) and yields our groups one at a time."""

    def __init__(self, hf_dir: str, *, scan_layers: bool = True, dtype: str = "auto", skip_mtp: bool = False,
                 **config_overrides):
        if dtype not in IMPORT_DTYPES:
            raise ValueError(f"dtype={dtype!r}; expected one of {IMPORT_DTYPES}")
        self.dtype = dtype
        raw = hf_config.load_json(hf_dir)
        self.hf_config = raw
        self.src = HFSource(hf_dir, hf_config.quantization_config(raw))
        cfg_dict = hf_config.read_hf_config(raw, scan_layers=scan_layers, **config_overrides)
        n_mtp = self._mtp_depth(cfg_dict, skip_mtp)
        cfg = model_config(cfg_dict, num_mtp_layers=n_mtp)
        self.groups = groups(cfg, self.src.prefix, self.src.head)
        skip = tuple(f"{self.src.prefix}layers.{cfg.num_layers + m}." for m in range(n_mtp, cfg_dict.num_mtp_layers))
        self.optional = self.src.plan(self.groups, skip_prefixes=skip)
        emb = self.src.stored_dtype(self.groups[0].leaves[0])
        param_dtype = DTYPE_NAMES.get(emb, "float32") if dtype == "auto" else dtype
        self.cfg: ModelConfig = dataclasses.replace(cfg, param_dtype=param_dtype)
        self.source_dtypes: dict[str, str] = {}
        self.mtp_shared: dict[str, bool] = {}

    def _mtp_depth(self, cfg_dict, skip_mtp: bool) -> int:
        """MTP layers to import: those config.json declares, unless skipped or wholly absent (logged)."""
        n = int(cfg_dict.num_mtp_layers)
        if n and skip_mtp:
            log.info("skipping %d MTP layer(s) (--skip-mtp)", n)
            return 0
        first = f"{self.src.prefix}layers.{cfg_dict.num_layers}."
        if n and not any(k.startswith(first) for k in self.src.st.names()):
            log.info("config.json declares %d MTP layer(s) but the checkpoint has no %s* tensors; importing "
                     "without MTP (num_mtp_layers=0)", n, first)
            return 0
        return n

    def leaf_dtype(self, leaf: Leaf) -> tuple[np.dtype, Optional[np.dtype]]:
        """(dtype to import in, stored float dtype or None when quantized)."""
        stored = self.src.stored_dtype(leaf)
        if leaf.force_fp32:
            return np.dtype(np.float32), stored
        if self.dtype != "auto":
            return NP_DTYPES[self.dtype], stored
        return (stored if stored is not None else np.dtype(np.float32)), stored

    def build(self, group: Group) -> dict:
        """One group's {"params": ..., "router_state": ...} (numpy arrays in our layout)."""
        flat = {}
        for leaf in group.leaves:
            dt, stored = self.leaf_dtype(leaf)
            key = f"{leaf.collection}/" + "/".join(leaf.path)
            flat[key] = self.src.read(leaf, dt)
            if stored is not None and stored != dt:
                self.source_dtypes[f"{group.name}/{key}"] = DTYPE_NAMES[stored]
        for leaf in self.optional.get(group.name, []):
            main = mtp_shared_source(leaf, self.src.prefix, self.src.head + ".weight")
            names = self.src.leaf_names(leaf)
            key = f"{group.name}/{leaf.path[0]}"
            if len(names) == 1 and self.src.same_tensor(names[0], main):
                self.mtp_shared[key] = True  # an exact copy of the main model's tensor: re-written on export
                continue
            log.info("%s differs from %s; keeping it as mtp/%s", names[0], main, key)
            dt, stored = self.leaf_dtype(leaf)
            flat["params/" + "/".join(leaf.path)] = self.src.read(leaf, dt)
            if stored is not None and stored != dt:
                self.source_dtypes[f"{group.name}/params/{leaf.path[0]}"] = DTYPE_NAMES[stored]
        return unflatten(flat)

    def __iter__(self) -> Iterator[tuple[str, dict]]:
        for g in self.groups:
            yield g.name, self.build(g)

    def source_meta(self) -> dict:
        """What export needs to reproduce the source: its config.json, stored dtypes, dropped MTP copies."""
        return {"hf_config": self.hf_config, "dtypes": dict(self.source_dtypes), "mtp_shared": dict(self.mtp_shared),
                "decoder_prefix": self.src.prefix}


def import_hf(hf_dir: str, out: str, *, scan_layers: bool = True, dtype: str = "auto", skip_mtp: bool = False,
              overwrite: bool = False, **config_overrides) -> str:
    """Convert an HF checkpoint directory into a converted checkpoint at `out`, one group in memory at a time."""
    imp = Importer(hf_dir, scan_layers=scan_layers, dtype=dtype, skip_mtp=skip_mtp, **config_overrides)
    w = CheckpointWriter(out, overwrite)
    for name, tree in imp:
        w.write(name, tree)
        log.info("wrote %s (%d arrays, %.1f MB)", name, len(flatten(tree)),
                 sum(a.nbytes for a in flatten(tree).values()) / 2**20)
        del tree
    return w.finish(imp.cfg, imp.source_meta())


def load_hf_checkpoint(hf_dir: str, *, scan_layers: bool = True, dtype: str = "auto", skip_mtp: bool = False,
                       **config_overrides) -> tuple[ModelConfig, dict, dict]:
    """(ModelConfig, params, router_state) straight from an HF checkpoint directory, in host memory."""
    imp = Importer(hf_dir, scan_layers=scan_layers, dtype=dtype, skip_mtp=skip_mtp, **config_overrides)
    params, state = assemble(imp.cfg, iter(imp), scan_layers)
    return imp.cfg, params, state


__all__ = ["Importer", "import_hf", "load_hf_checkpoint", "CheckpointError"]
