"""The converted-checkpoint format: one orbax PyTree checkpoint per layer group, plus JSON metadata.

    CKPT/
      model_config.json   the ModelConfig fields (`model_config(json.load(...))` rebuilds it)
      checkpoint.json     {"format", "groups": {group: {"params/a/b": [dtype, shape], ...}}, "source": {...}}
      globals/            orbax PyTree {"params": {embedding, final_norm, lm_head}}
      layers_{i}/         {"params": <decoder layer>, "router_state": {"moe": {...}}}   (unrolled prefix/suffix)
      unit_{u}/           {"params": {"layer_0": ..., ...}, "router_state": ...}       (one step of the scan)
      mtp_{m}/            {"params": {enorm, hnorm, eh_proj, block, final_norm, ...}, "router_state": {"block": ...}}

Groups are the layout-independent pieces of both trees: `restore_checkpoint` stacks the units into the scanned
`stack` (leading axis = unit) or lays them out as `stack_{u}`, so one checkpoint serves scan and no-scan models.
Memory bound while writing: one group (for a MoE model, one decoder layer — its E experts — in the stored
dtype) plus one source tensor; nothing else is held. The directory is written as CKPT.partial and renamed
when complete, so a crashed import never leaves something that looks like a checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any, Iterable, Iterator, Optional

import jax
import numpy as np

from composer2_jax.model.layer_plan import SCANNED_STACK, layer_name, layer_plan, unit_name
from composer2_jax.model_config import ModelConfig, model_config

FORMAT = "composer2_jax.convert/1"
MODEL_CONFIG = "model_config.json"
META = "checkpoint.json"
COLLECTIONS = ("params", "router_state")


def _checkpointer():
    import orbax.checkpoint as ocp  # deferred: orbax is slow to import and only needed here

    return ocp.PyTreeCheckpointer()


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': x}} → {'a/b': x}."""
    out = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def unflatten(flat: dict[str, Any]) -> dict:
    """The inverse of `flatten`."""
    out: dict = {}
    for key, v in flat.items():
        node = out
        *parents, last = key.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = v
    return out


def config_to_json(cfg: ModelConfig) -> dict:
    """ModelConfig → JSON-able dict (model_config(d) inverts it)."""
    return dataclasses.asdict(cfg)


# ------------------------------------------------------------------------------------------- groups ⇄ trees


def group_names(cfg: ModelConfig) -> list[str]:
    """Group names in streaming order (the same as `mapping.groups`)."""
    pre, pattern, n_units, suf = layer_plan(cfg)
    return (["globals"] + [layer_name(i) for i in pre] + [f"unit_{u}" for u in range(n_units)]
            + [layer_name(i) for i in suf] + [f"mtp_{m}" for m in range(cfg.num_mtp_layers)])


def split(cfg: ModelConfig, params: dict, router_state: Optional[dict] = None) -> Iterator[tuple[str, dict]]:
    """Model trees (scanned `stack` or unrolled `stack_{u}`) → (group name, {"params", "router_state"}) in order."""
    router_state = router_state or {}

    def unit(col: dict, u: int):
        """Unit u of the scanned stack (a view) or of the unrolled layout."""
        if SCANNED_STACK in col:
            return jax.tree.map(lambda a: a[u], col[SCANNED_STACK])
        return col.get(unit_name(u))

    for name in group_names(cfg):
        if name == "globals":
            tree = {"params": {k: params[k] for k in ("embedding", "final_norm", "lm_head")}}
        elif name.startswith("unit_"):
            u = int(name.split("_")[1])
            tree = {"params": unit(params, u), "router_state": unit(router_state, u)}
        elif name.startswith("mtp_"):
            tree = {"params": params.get("mtp", {}).get(name), "router_state": router_state.get("mtp", {}).get(name)}
            if tree["params"] is None:
                raise ValueError(f"num_mtp_layers={cfg.num_mtp_layers} but params lack mtp/{name}")
        else:
            tree = {"params": params[name], "router_state": router_state.get(name)}
        tree = {k: jax.tree.map(np.asarray, v) for k, v in tree.items() if v}
        yield name, tree


def assemble(cfg: ModelConfig, items: Iterable[tuple[str, dict]], scan_layers: bool) -> tuple[dict, dict]:
    """(group name, tree) pairs → (params, router_state) in the scanned or unrolled layout.

    Units are copied into preallocated [U, ...] arrays as they arrive, so with a lazy `items` only the stacked
    result and one unit are alive at a time.
    """
    params: dict = {}
    state: dict = {}
    _, _, n_units, _ = layer_plan(cfg)
    stacked: dict[str, dict[str, np.ndarray]] = {"params": {}, "router_state": {}}
    for name, tree in items:
        p, r = tree.get("params", {}), tree.get("router_state")
        if name == "globals":
            params.update(p)
        elif name.startswith("unit_"):
            u = int(name.split("_")[1])
            for col, dst in (("params", params), ("router_state", state)):
                if not tree.get(col):
                    continue
                if not scan_layers:
                    dst[unit_name(u)] = tree[col]
                    continue
                for key, a in flatten(tree[col]).items():
                    buf = stacked[col].setdefault(key, np.empty((n_units,) + a.shape, a.dtype))
                    buf[u] = a
        elif name.startswith("mtp_"):
            params.setdefault("mtp", {})[name] = p
            if r:
                state.setdefault("mtp", {})[name] = r
        else:
            params[name] = p
            if r:
                state[name] = r
    for col, dst in (("params", params), ("router_state", state)):
        if stacked[col]:
            dst[SCANNED_STACK] = unflatten(stacked[col])
    return params, state


def describe(tree: dict) -> dict[str, list]:
    """{'params/a/b': [dtype, shape]} of a group tree."""
    return {k: [str(np.dtype(v.dtype)), list(v.shape)] for k, v in flatten(tree).items()}


# ----------------------------------------------------------------------------------------------- on disk


class CheckpointWriter:
    """Writes groups one at a time into PATH.partial; `finish` adds the metadata and renames it to PATH."""

    def __init__(self, path: str, overwrite: bool = False):
        self.path = os.path.abspath(path)
        if os.path.exists(self.path) and not overwrite:
            raise FileExistsError(f"{self.path} exists; pass overwrite=True (--overwrite) to replace it")
        self.tmp = self.path + ".partial"
        shutil.rmtree(self.tmp, ignore_errors=True)
        os.makedirs(self.tmp)
        self.groups: dict[str, dict] = {}
        self._ckpt = _checkpointer()

    def write(self, name: str, tree: dict):
        """Save one group ({"params": ..., "router_state": ...} of numpy arrays)."""
        self._ckpt.save(os.path.join(self.tmp, name), tree)
        self.groups[name] = describe(tree)

    def finish(self, cfg: ModelConfig, source: Optional[dict] = None) -> str:
        missing = [g for g in group_names(cfg) if g not in self.groups]
        if missing:
            raise ValueError(f"checkpoint is missing groups {missing}")
        with open(os.path.join(self.tmp, MODEL_CONFIG), "w") as f:
            json.dump(config_to_json(cfg), f, indent=2)
        with open(os.path.join(self.tmp, META), "w") as f:
            json.dump({"format": FORMAT, "groups": self.groups, "source": source or {}}, f, indent=1)
        if os.path.exists(self.path):
            shutil.rmtree(self.path)
        os.rename(self.tmp, self.path)
        return self.path


def save_checkpoint(path: str, cfg: ModelConfig, params: dict, router_state: Optional[dict] = None, *,
                    source: Optional[dict] = None, overwrite: bool = False) -> str:
    """Write model trees (either layout, boxed or not) as a converted checkpoint; returns its path."""
    from flax.linen import meta

    params, router_state = meta.unbox(params), meta.unbox(router_state or {})
    w = CheckpointWriter(path, overwrite)
    for name, tree in split(cfg, params, router_state):
        w.write(name, tree)
    return w.finish(cfg, source)


def read_meta(path: str) -> tuple[ModelConfig, dict]:
    """(ModelConfig, checkpoint.json) of a converted checkpoint."""
    meta_path = os.path.join(path, META)
    if not os.path.exists(meta_path):
        raise FileNotFoundError(f"{path} is not a converted checkpoint (no {META})")
    with open(meta_path) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: checkpoint format {meta.get('format')!r}; this code reads {FORMAT!r}")
    with open(os.path.join(path, MODEL_CONFIG)) as f:
        return model_config(json.load(f)), meta


def restore_group(path: str, name: str) -> dict:
    """One group's {"params", "router_state"} as numpy arrays."""
    return _checkpointer().restore(os.path.join(os.path.abspath(path), name))


def restore_checkpoint(path: str, *, scan_layers: Optional[bool] = None, **overrides) -> tuple[ModelConfig, dict, dict]:
    """(ModelConfig, params, router_state) of a converted checkpoint, as host numpy arrays.

    `scan_layers` picks the layout (default: the one recorded at import); other ModelConfig fields (dtype,
    remat_policy, ...) may be overridden too. Groups are read one at a time; peak host memory is the model plus
    one group.
    """
    cfg, _ = read_meta(path)
    if scan_layers is not None:
        overrides["scan_layers"] = scan_layers
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    items = ((name, restore_group(path, name)) for name in group_names(cfg))  # lazy: one group read at a time
    params, state = assemble(cfg, items, cfg.scan_layers)
    return cfg, params, state
