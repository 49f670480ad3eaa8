"""The RL run's advantage: Dr. GRPO, Â = R − mean_group(R) over each task's rollouts (docs/design.md), the critic-free
group baseline the trainer uses; tree groups get edge advantages instead (rl/tree.py).

Group structure, two layouts (pick one per call):
- rewards [G, n] and group_ids=None: row g holds the n rollouts of prompt g (equal group sizes);
- rewards [N] with group_ids [N] ints in [0, num_groups): any group sizes, any order (num_groups defaults to N
  and must be static under jit).
The result has the shape of `rewards`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from composer2_jax.rl.records import GroupRecord

Array = jax.Array


def _flatten_groups(rewards: Array, group_ids: Array | None, num_groups: int | None):
    """(flat rewards [N], ids [N], number of groups, original shape) from either layout."""
    rewards = jnp.asarray(rewards, jnp.float32)
    if group_ids is None:
        if rewards.ndim != 2:
            raise ValueError(f"rewards without group_ids must be [G, n], got shape {tuple(rewards.shape)}")
        g, n = rewards.shape
        return rewards.reshape(-1), jnp.repeat(jnp.arange(g), n), g, rewards.shape
    group_ids = jnp.asarray(group_ids)
    if rewards.ndim != 1 or group_ids.shape != rewards.shape:
        raise ValueError(
            f"with group_ids, rewards and group_ids must both be [N]; got {tuple(rewards.shape)} and "
            f"{tuple(group_ids.shape)}"
        )
    return rewards, group_ids, rewards.shape[0] if num_groups is None else num_groups, rewards.shape


def group_mean(rewards: Array, group_ids: Array | None = None, num_groups: int | None = None) -> Array:
    """Per-rollout group mean, shaped like rewards."""
    r_N, ids_N, g, shape = _flatten_groups(rewards, group_ids, num_groups)
    count_G = jax.ops.segment_sum(jnp.ones_like(r_N), ids_N, num_segments=g)
    mean_G = jax.ops.segment_sum(r_N, ids_N, num_segments=g) / jnp.maximum(count_G, 1.0)
    return mean_G[ids_N].reshape(shape)


def dr_grpo_advantages(
    rewards: Array, group_ids: Array | None = None, num_groups: int | None = None
) -> Array:
    """Dr. GRPO: Â_i = R_i − mean_group(R), no std division (Liu et al. 2025, "Understanding R1-Zero-like
    training"); pair it with the constant length normaliser, `aggregate(..., mode="constant")`."""
    return jnp.asarray(rewards, jnp.float32) - group_mean(rewards, group_ids, num_groups)


def group_advantages(groups: list[GroupRecord]) -> list[float]:
    """Dr. GRPO advantage of every episode, groups flattened in order."""
    rewards = np.asarray([r for g in groups for r in g.rewards], np.float32)
    ids = np.asarray([i for i, g in enumerate(groups) for _ in g.episodes], np.int32)
    return [float(a) for a in np.asarray(dr_grpo_advantages(rewards, ids, num_groups=len(groups)))]
