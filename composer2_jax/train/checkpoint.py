"""Orbax checkpoints of the whole run: train state (params, optimizer, router biases, step), data-iterator
state and config, saved asynchronously, kept N at a time, committed atomically (orbax writes a temporary
directory and renames it only when every item is complete, so a killed save leaves no step behind).

Restoring takes the target shardings from an abstract state, so a checkpoint restores onto a different mesh.
A step that fails to restore (corrupt or missing files) raises `CheckpointError` naming it; with
`fallback=True` the newest step that does restore is used instead and the failure is reported.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Optional

import jax
import orbax.checkpoint as ocp

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """When and how a run saves checkpoints."""

    every: int = 20  # save every N steps (and at the end)
    keep: int = 3  # checkpoints kept
    async_save: bool = True  # save in the background while training continues
    fallback: bool = True  # if the newest checkpoint is corrupt, log it and resume from the previous one

    def __post_init__(self):
        if self.every < 1 or self.keep < 1:
            raise ValueError(f"checkpoint.every={self.every}, checkpoint.keep={self.keep}; expected >= 1")


class CheckpointError(RuntimeError):
    """A checkpoint step could not be restored."""


class Checkpointer:
    """Thin wrapper over `ocp.CheckpointManager` with the items of a training run."""

    def __init__(self, directory: str | Path, max_to_keep: int = 3, async_save: bool = True,
                 processes: Optional[set[int]] = None):
        """`processes`: the jax processes that save together (None = all of the job's); e.g. {0} for an RL driver
        whose job also holds rollout processes that never checkpoint."""
        self.directory = Path(directory).absolute()
        self.processes = processes
        multi = ocp.options.MultiprocessingOptions()
        if processes is not None:  # orbax creates the root only with every process active
            self.directory.mkdir(parents=True, exist_ok=True)
            multi = ocp.options.MultiprocessingOptions(primary_host=min(processes), active_processes=set(processes))
        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, enable_async_checkpointing=async_save,
                                               create=processes is None, cleanup_tmp_directories=True,
                                               multiprocessing_options=multi)
        self.manager = ocp.CheckpointManager(self.directory, options=options,
                                             item_names=("state", "data", "config"))

    def save(self, step: int, state, data_state: Optional[dict] = None, config: Optional[dict] = None,
             force: bool = False) -> bool:
        """Start an (async) save of `state` and the JSON items; returns whether a save was started."""
        if self.processes is not None:  # orbax refuses arrays local to some processes of a job: save host copies
            state = jax.device_get(state)
        args = dict(state=ocp.args.StandardSave(state))
        args["data"] = ocp.args.JsonSave(data_state if data_state is not None else {})
        args["config"] = ocp.args.JsonSave(config if config is not None else {})
        return self.manager.save(step, args=ocp.args.Composite(**args), force=force)

    def wait(self):
        """Block until pending async saves are committed."""
        self.manager.wait_until_finished()

    def steps(self) -> list[int]:
        """Committed steps, oldest first."""
        return sorted(self.manager.all_steps())

    def latest_step(self) -> Optional[int]:
        """The newest committed step, or None."""
        return self.manager.latest_step()

    def restore(self, abstract_state, step: Optional[int] = None, fallback: bool = False):
        """(step, state, data_state, config) restored into the shardings carried by `abstract_state`."""
        steps = self.steps()
        if not steps:
            raise CheckpointError(f"no committed checkpoint in {self.directory}")
        candidates = [step] if step is not None else list(reversed(steps))
        if step is not None and step not in steps:
            raise CheckpointError(f"checkpoint step {step} not found in {self.directory}; committed steps: {steps}")
        errors = []
        for s in candidates:
            try:
                return (s,) + self._restore_step(s, abstract_state)
            except Exception as e:
                msg = (f"checkpoint step {s} in {self.directory / str(s)} is corrupt or incomplete "
                       f"({type(e).__name__}: {str(e)[:300]})")
                errors.append(msg)
                if not fallback:
                    older = [x for x in steps if x < s]
                    raise CheckpointError(msg + (f"; older committed steps that may restore: {older}" if older
                                                 else "; no older step exists")) from e
                log.error("%s; trying the previous step", msg)
        raise CheckpointError("no checkpoint step restores: " + " | ".join(errors))

    def _restore_step(self, s: int, abstract_state) -> tuple[Any, dict, dict]:
        restored = self.manager.restore(s, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore(),
            config=ocp.args.JsonRestore()))
        _check_tree(restored["state"], abstract_state)
        return restored["state"], restored["data"] or {}, restored["config"] or {}

    def saved_config(self, step: Optional[int] = None) -> dict:
        """The run config saved with `step` (default: the newest committed step); {} when it saved none."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"no committed checkpoint in {self.directory}")
        restored = self.manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))
        return restored["config"] or {}

    def close(self):
        """Finish pending saves and release resources."""
        self.manager.wait_until_finished()
        self.manager.close()


def _check_tree(restored, abstract):
    """Every restored leaf has the shape and dtype the abstract state expects."""
    for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(abstract)[0], jax.tree.leaves(restored)):
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            raise ValueError(f"{jax.tree_util.keystr(path)}: restored {b.dtype}{tuple(b.shape)}, "
                             f"expected {a.dtype}{tuple(a.shape)}")
