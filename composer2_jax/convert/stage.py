"""A training stage's checkpoints as an export source (cpt_bulk, cpt_long, sft and RL versions alike).

Every stage saves with `train/checkpoint.Checkpointer` (an orbax CheckpointManager):

    WORKDIR/checkpoints/{step}/state    TrainState {step, params, opt_state, router_state}   (RL: step = version)
                              /data     the data-iterator (RL: loop) state, JSON
                              /config   the run config record, JSON; its `model` section = ModelConfig fields,
                                        its `tokenizer` section = {name, path}
    WORKDIR/checkpoints/{step}.orbax-checkpoint-tmp-*   a save in progress (not committed: never read)

`--ckpt` may name the workdir, its checkpoints/ directory, or one step directory; `--step` picks a committed step
(default: the newest). Only `state.params` and `state.router_state` are read, as host numpy arrays restored without
a target (no optimizer is built, nothing goes to a device): host memory holds the parameters once (plus one restore
batch in flight), and `checkpoint.split` cuts them into the converted format's groups as views. Nothing here
writes or deletes in the stage's directory (an orbax manager would clean up the temporary directory of a save in
progress).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from typing import Any, Optional

import numpy as np

from composer2_jax.convert.checkpoint import describe, flatten, split, unflatten
from composer2_jax.convert.hf_source import CheckpointError
from composer2_jax.convert.mapping import groups
from composer2_jax.model.layer_plan import SCANNED_STACK, layer_name, layer_plan, unit_name
from composer2_jax.model_config import ModelConfig, model_config

log = logging.getLogger(__name__)
CHECKPOINTS = "checkpoints"
STATE, CONFIG = "state", "config"
# Tokenizer files an HF directory carries (copied from the stage's tokenizer directory when present).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tiktoken.model", "special_tokens_map.json",
                   "chat_template.jinja", "chat_template.json", "added_tokens.json", "vocab.json", "merges.txt",
                   "tokenizer.model")
TOKENIZER_CODE = re.compile(r"^tokenization_\w+\.py$")  # Kimi's tokenizer_config.json auto_map points at one
RESTORE_BATCH_BYTES = 256 * 2**20  # parameter bytes restored per orbax call (see restore_params)
_TMP = re.compile(r"^\d+\.orbax-checkpoint-tmp")
_EXPECTED = ("a converted checkpoint (checkpoint.json), a stage workdir (holding checkpoints/), a stage's "
             "checkpoints/ directory (holding committed step directories) or one step directory (holding state/)")


def committed_steps(directory: str) -> list[int]:
    """Committed steps of a checkpoint manager directory, oldest first (orbax renames a step into place only once
    every item is written, so a numeric name is a committed step)."""
    return sorted(int(n) for n in os.listdir(directory) if n.isdigit() and os.path.isdir(os.path.join(directory, n)))


def _unfinished(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if _TMP.match(n))


def is_step_dir(path: str) -> bool:
    return os.path.basename(os.path.normpath(path)).isdigit() and os.path.isdir(os.path.join(path, STATE))


def locate(path: str, step: Optional[int] = None) -> tuple[str, int, list[int]]:
    """(step directory, step, committed steps) for a stage workdir, its checkpoints/ directory or one step
    directory; errors name what was found and what was expected."""
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"--ckpt {path} does not exist" if not os.path.exists(path)
                                else f"--ckpt {path} is a file; expected {_EXPECTED}")
    if is_step_dir(path):
        own = int(os.path.basename(path))
        if step is not None and step != own:
            raise CheckpointError(f"--ckpt {path} is the step directory of step {own}, but --step {step} was given; "
                                  f"name the checkpoints/ directory ({os.path.dirname(path)}) to pick a step")
        return path, own, committed_steps(os.path.dirname(path))
    if _TMP.match(os.path.basename(path)):
        raise CheckpointError(f"--ckpt {path} is an unfinished save (a save in progress or a killed one), not a "
                              f"committed step")
    workdir = os.path.isdir(os.path.join(path, CHECKPOINTS))
    directory = os.path.join(path, CHECKPOINTS) if workdir else path
    steps = committed_steps(directory)
    if not steps:
        tmp = _unfinished(directory)
        if tmp:
            raise CheckpointError(f"no committed checkpoint in {directory}: only unfinished saves {tmp} (a save in "
                                  f"progress or a killed one)")
        if workdir:
            raise CheckpointError(f"no committed checkpoint in {directory} (empty of step directories)")
        if not os.listdir(path):
            raise CheckpointError(f"--ckpt {path} is empty; expected {_EXPECTED}")
        raise CheckpointError(f"--ckpt {path} holds none of: {_EXPECTED}; found {sorted(os.listdir(path))[:10]}")
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise CheckpointError(f"--step {step} is not a committed checkpoint in {directory}; committed steps: {steps}")
    step_dir = os.path.join(directory, str(step))
    if not os.path.isdir(os.path.join(step_dir, STATE)):
        raise CheckpointError(f"{step_dir} has no {STATE}/ item: not a training-stage checkpoint step "
                              f"(train/checkpoint.Checkpointer saves state, data and config)")
    return step_dir, step, steps


def read_record(step_dir: str) -> dict:
    """The run config record saved with a step ({} when the step saved none)."""
    import orbax.checkpoint as ocp

    path = os.path.join(step_dir, CONFIG)
    if not os.path.isdir(path):
        return {}
    with ocp.Checkpointer(ocp.JsonCheckpointHandler()) as ck:
        return ck.restore(path) or {}


def recorded_model(step_dir: str, record: dict) -> ModelConfig:
    """The model the stage trained, from its recorded run config (YaRN, MTP depth, vocabulary as trained)."""
    if not isinstance(record.get("model"), dict):
        raise CheckpointError(f"{step_dir}: the checkpoint recorded no run config with a 'model' section (saved "
                              f"before configs were recorded?); the export needs the stage's model config")
    try:
        return model_config(record["model"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{step_dir}: the recorded model config does not build a ModelConfig: {e}") from e


def restore_params(step_dir: str, batch_bytes: int = RESTORE_BATCH_BYTES) -> tuple[dict, dict]:
    """(params, router_state) of a step's TrainState as host numpy arrays: partial restores without a target, so
    neither the optimizer state nor a device copy is ever materialised.

    Leaves are restored in consecutive batches of about `batch_bytes` (a larger leaf alone): orbax reads a batch's
    arrays concurrently, each through a buffer of its own, so the host holds the parameters plus one batch in
    flight rather than up to another half of them (measured figures, against one restore of the whole tree:
    composer2_jax/convert/README.md, "Export").
    """
    import jax
    import orbax.checkpoint as ocp

    path = os.path.join(step_dir, STATE)
    with ocp.PyTreeCheckpointer() as ck:
        tree = ck.metadata(path)
        tree = getattr(getattr(tree, "item_metadata", tree), "tree", tree)
        if not isinstance(tree, dict) or not isinstance(tree.get("params"), dict):
            raise CheckpointError(f"{path}: unsupported layout; expected a TrainState with a params tree (found "
                                  f"{sorted(tree) if isinstance(tree, dict) else type(tree).__name__})")
        wanted = flatten({k: tree[k] for k in ("params", "router_state") if isinstance(tree.get(k), dict)})
        out: dict[str, np.ndarray] = {}
        batch: dict[str, Any] = {}
        size = 0

        def restore(batch: dict[str, Any]):
            item = unflatten(batch)
            args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), item)
            got = ck.restore(path, args=ocp.args.PyTreeRestore(item=item, restore_args=args, partial_restore=True))
            out.update(flatten(got))

        for key, m in wanted.items():
            n = int(np.prod(m.shape)) * np.dtype(m.dtype).itemsize
            if batch and size + n > batch_bytes:
                restore(batch)
                batch, size = {}, 0
            batch[key], size = m, size + n
        if batch:
            restore(batch)
    trees = unflatten(out)
    return trees["params"], trees.get("router_state") or {}


def check_top_level(cfg: ModelConfig, params: dict, where: str):
    """The params' top-level entries are those of the recorded model config's layout; errors name the entry."""
    pre, _, n_units, suf = layer_plan(cfg)
    want = {"embedding", "final_norm", "lm_head"} | {layer_name(i) for i in list(pre) + list(suf)}
    if n_units:
        want |= {SCANNED_STACK} if cfg.scan_layers else {unit_name(u) for u in range(n_units)}
    if cfg.num_mtp_layers:
        want.add("mtp")
    missing, extra = sorted(want - set(params)), sorted(set(params) - want)
    if missing or extra:
        raise CheckpointError(f"{where}: unsupported layout for the recorded model config (num_layers="
                              f"{cfg.num_layers}, scan_layers={cfg.scan_layers}, num_mtp_layers={cfg.num_mtp_layers})"
                              f": params missing {missing}, unexpected {extra}")
    for key, a in flatten(params.get(SCANNED_STACK, {}) if cfg.scan_layers else {}).items():
        if not a.shape or a.shape[0] != n_units:
            raise CheckpointError(f"{where}: {SCANNED_STACK}/{key} has shape {list(a.shape)}; the recorded model "
                                  f"config stacks {n_units} units (leading axis)")
    extra_mtp = sorted(set(params.get("mtp", {})) - {f"mtp_{m}" for m in range(cfg.num_mtp_layers)})
    if extra_mtp:
        raise CheckpointError(f"{where}: params hold MTP modules {extra_mtp} beyond the recorded num_mtp_layers="
                              f"{cfg.num_mtp_layers}")


def check_groups(cfg: ModelConfig, items: dict[str, dict], where: str):
    """Every group holds exactly the leaves (and shapes) the HF mapping of `cfg` expects; errors name the leaf."""
    for g in groups(cfg):
        have = describe(items.get(g.name, {}))
        want = {f"{l.collection}/" + "/".join(l.path): list(l.shape) for l in g.leaves}
        want.update({"params/" + l.path[0]: list(l.shape) for l in g.optional if "params/" + l.path[0] in have})
        for key, shape in want.items():
            if key not in have:
                raise CheckpointError(f"{where}: unsupported layout: {g.name}/{key} is missing (expected shape "
                                      f"{shape} for the recorded model config)")
            if have[key][1] != shape:
                raise CheckpointError(f"{where}: {g.name}/{key} has shape {have[key][1]}; the recorded model config "
                                      f"expects {shape}")
        for key in sorted(set(have) - set(want)):
            raise CheckpointError(f"{where}: unsupported layout: {g.name}/{key} {have[key]} has no HF tensor")


class StageSource:
    """One step of a stage's checkpoints, planned like a converted checkpoint (`cfg`, `meta`, `group(name)`)."""

    kind = "stage"

    def __init__(self, path: str, step: Optional[int] = None):
        """Locate the step and read its recorded config (cheap: no array is read before `load`)."""
        self.step_dir, self.step, self.steps = locate(path, step)
        self.record = read_record(self.step_dir)
        self.cfg = recorded_model(self.step_dir, self.record)

    def load(self):
        """Restore the parameters (host arrays), check them against the config, plan the groups."""
        params, router_state = restore_params(self.step_dir)
        check_top_level(self.cfg, params, self.step_dir)
        items = list(split(self.cfg, params, router_state))  # views of the restored arrays
        self.trees = dict(items)
        check_groups(self.cfg, self.trees, self.step_dir)
        # The MTP modules share the main embedding and head: written back as copies (the DeepSeek-V3 release form).
        shared = {f"mtp_{m}/{k}": True for m in range(self.cfg.num_mtp_layers) for k in ("embedding", "head")
                  if k not in self.trees[f"mtp_{m}"].get("params", {})}
        self.meta = {"groups": {name: describe(t) for name, t in items},
                     "source": {"mtp_shared": shared, "stage": {"step_dir": self.step_dir, "step": self.step}}}
        log.info("stage checkpoint %s (step %d of committed %s): %d parameters", self.step_dir, self.step,
                 self.steps, sum(int(np.prod(a.shape)) for a in flatten(params).values()))

    def group(self, name: str) -> dict:
        return self.trees[name]

    def tokenizer(self) -> dict:
        """The recorded tokenizer section ({name, path}; byte when none was recorded)."""
        tok = self.record.get("tokenizer") or {}
        return {"name": tok.get("name", "byte"), "path": tok.get("path", "")}


def tokenizer_files(directory: str) -> list[str]:
    """The tokenizer files present in `directory` (names)."""
    return sorted(n for n in os.listdir(directory)
                  if os.path.isfile(os.path.join(directory, n)) and (n in TOKENIZER_FILES or TOKENIZER_CODE.match(n)))


def tokenizer_dir(path: str, what: str) -> str:
    """The directory holding a tokenizer given as a directory or as one of its files; errors name `what`."""
    if not path:
        raise CheckpointError(f"{what} is empty")
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    if not os.path.exists(path):
        raise CheckpointError(f"{what} {path} does not exist (pass --tokenizer DIR to copy the tokenizer files from "
                              f"elsewhere)")
    if not tokenizer_files(directory):
        raise CheckpointError(f"{what} {directory} holds no tokenizer file; expected one of {TOKENIZER_FILES}")
    return directory


def copy_tokenizer(directory: str, out: str) -> list[str]:
    """Copy the tokenizer files of `directory` into `out`; returns their names."""
    names = tokenizer_files(directory)
    for n in names:
        shutil.copy2(os.path.join(directory, n), os.path.join(out, n))
    return names


def token_ids(name: str, path: str) -> dict[str, Any]:
    """bos/eos/pad ids of the stage's tokenizer, for config.json ({} when it does not build)."""
    from composer2_jax.data.tokenizer import make_tokenizer

    try:
        tok = make_tokenizer(name, path or None)
    except (ValueError, OSError, KeyError) as e:
        log.warning("tokenizer %s (%s) does not build (%s): config.json gets no token ids", name, path, e)
        return {}
    ids = {"bos_token_id": tok.bos_id, "eos_token_id": tok.eos_id, "pad_token_id": getattr(tok, "pad_id", None)}
    return {k: int(v) for k, v in ids.items() if v is not None}
