"""Advantage estimators: GAE (with a critic) and critic-free group baselines (GRPO, Dr. GRPO, RLOO); KL in rewards.

Group structure, two layouts (pick one per call):
- rewards [G, n] and group_ids=None: row g holds the n rollouts of prompt g (equal group sizes);
- rewards [N] with group_ids [N] ints in [0, num_groups): any group sizes, any order (num_groups defaults to N
  and must be static under jit). `group_ids_from_keys` turns arbitrary task keys into such ids.
The result has the shape of `rewards`. Broadcast sequence advantages over tokens with `token_advantages`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from composer2_jax.losses.rl import check_token_shapes, kl_k1
from composer2_jax.rl.records import GroupRecord

Array = jax.Array


def group_ids_from_keys(keys: Sequence[Hashable]) -> np.ndarray:
    """[N] int32 ids 0..G−1 in order of first appearance of each key (e.g. the task id of each rollout)."""
    ids: dict[Hashable, int] = {}
    return np.asarray([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int32)


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


def group_stats(
    rewards: Array, group_ids: Array | None = None, num_groups: int | None = None
) -> tuple[Array, Array, Array]:
    """Per-rollout (group mean, group population std, group size), each shaped like rewards."""
    r_N, ids_N, g, shape = _flatten_groups(rewards, group_ids, num_groups)
    count_G = jax.ops.segment_sum(jnp.ones_like(r_N), ids_N, num_segments=g)
    safe_G = jnp.maximum(count_G, 1.0)
    mean_G = jax.ops.segment_sum(r_N, ids_N, num_segments=g) / safe_G
    dev_N = r_N - mean_G[ids_N]
    var_G = jax.ops.segment_sum(dev_N * dev_N, ids_N, num_segments=g) / safe_G
    return mean_G[ids_N].reshape(shape), jnp.sqrt(var_G)[ids_N].reshape(shape), count_G[ids_N].reshape(shape)


def grpo_advantages(
    rewards: Array, group_ids: Array | None = None, num_groups: int | None = None, eps: float = 1e-6
) -> Array:
    """GRPO: Â_i = (R_i − mean_group(R)) / (std_group(R) + ε), population std (Shao et al. 2024, DeepSeekMath)."""
    mean, std, _ = group_stats(rewards, group_ids, num_groups)
    return (jnp.asarray(rewards, jnp.float32) - mean) / (std + eps)


def dr_grpo_advantages(
    rewards: Array, group_ids: Array | None = None, num_groups: int | None = None
) -> Array:
    """Dr. GRPO: Â_i = R_i − mean_group(R), no std division (Liu et al. 2025, "Understanding R1-Zero-like
    training"); pair it with the constant length normaliser, `aggregate(..., mode="constant")`."""
    mean, _, _ = group_stats(rewards, group_ids, num_groups)
    return jnp.asarray(rewards, jnp.float32) - mean


def rloo_advantages(
    rewards: Array, group_ids: Array | None = None, num_groups: int | None = None
) -> Array:
    """RLOO: Â_i = R_i − (1/(n−1))·Σ_{j≠i} R_j = n/(n−1)·(R_i − mean_group(R)).

    Kool et al. 2019; Ahmadian et al. 2024 ("Back to basics"). A group of one rollout has no baseline: Â = 0.
    """
    mean, _, count = group_stats(rewards, group_ids, num_groups)
    r = jnp.asarray(rewards, jnp.float32)
    return jnp.where(count > 1, (r - mean) * count / jnp.maximum(count - 1.0, 1.0), 0.0)


def token_advantages(advantages: Array, mask: Array) -> Array:
    """[B, T] sequence advantages [B] broadcast over each sequence's trained tokens (0 elsewhere)."""
    if advantages.shape != mask.shape[:1]:
        raise ValueError(f"advantages must be [B]={mask.shape[:1]} for a mask [B, T]; got {tuple(advantages.shape)}")
    return advantages[:, None] * mask.astype(jnp.float32)


def reward_on_last_token(rewards: Array, mask: Array) -> Array:
    """[B, T] token rewards: the sequence reward R [B] on the last trained token of each row, 0 elsewhere."""
    if rewards.shape != mask.shape[:1]:
        raise ValueError(f"rewards must be [B]={mask.shape[:1]} for a mask [B, T]; got {tuple(rewards.shape)}")
    t = mask.shape[1]
    last_B = t - 1 - jnp.argmax(jnp.flip(mask > 0, axis=1), axis=1)
    has_B = jnp.any(mask > 0, axis=1)
    onehot_BT = jax.nn.one_hot(last_B, t, dtype=jnp.float32) * has_B[:, None]
    return rewards[:, None].astype(jnp.float32) * onehot_BT


def fold_kl_into_rewards(rewards: Array, logp: Array, ref_logp: Array, mask: Array, beta: float) -> Array:
    """Rewards minus β·k1, k1 = log π − log π_ref (Ouyang et al. 2022 / Ziegler et al. 2019 KL-in-reward).

    rewards [B] (sequence rewards): R − β·Σ_t mask·k1_t.
    rewards [B, T] (token rewards, for GAE): r_t − β·mask·k1_t.
    k1 enters the reward as a constant (stop-gradient): the policy gradient then carries the KL.
    """
    check_token_shapes(mask, logp=logp, ref_logp=ref_logp)
    k1_BT = jax.lax.stop_gradient(jnp.where(mask > 0, kl_k1(logp, ref_logp), 0.0) * mask)
    rewards = jnp.asarray(rewards, jnp.float32)
    if rewards.shape == mask.shape:
        return rewards - beta * k1_BT
    if rewards.shape == mask.shape[:1]:
        return rewards - beta * jnp.sum(k1_BT, axis=1)
    raise ValueError(f"rewards must be [B] or [B, T] for a mask {tuple(mask.shape)}; got {tuple(rewards.shape)}")


def gae_advantages(
    rewards: Array,
    values: Array,
    mask: Array,
    gamma: float = 1.0,
    lam: float = 1.0,
    segment_ids: Array | None = None,
) -> tuple[Array, Array]:
    """GAE over the trained tokens of each sequence: (advantages [B, T], returns [B, T]).

    Schulman et al. 2016: δ_t = r_t + γ·V_{t+1} − V_t, Â_t = δ_t + γλ·Â_{t+1}, returns = Â + V, with V and
    Â zero past the sequence end. Masked tokens (observations, prompt) are skipped: t+1 means the next trained
    token of the same sequence, so an episode's turns chain through the tool outputs between them; rewards
    placed on masked tokens are ignored. segment_ids [B, T] (packed rows) stop the recursion at segment ends.
    """
    check_token_shapes(mask, rewards=rewards, values=values, segment_ids=segment_ids)
    m = mask > 0
    seg = jnp.zeros(mask.shape, jnp.int32) if segment_ids is None else segment_ids.astype(jnp.int32)
    rewards, values = rewards.astype(jnp.float32), values.astype(jnp.float32)

    def step(carry, xs):
        next_v, next_a, next_seg = carry  # [B] each
        r, v, m_t, s = xs  # [B] each
        same = s == next_seg
        next_v, next_a = jnp.where(same, next_v, 0.0), jnp.where(same, next_a, 0.0)
        adv = r + gamma * next_v - v + gamma * lam * next_a
        carry = (jnp.where(m_t, v, next_v), jnp.where(m_t, adv, next_a), jnp.where(m_t, s, next_seg))
        return carry, jnp.where(m_t, adv, 0.0)

    b = mask.shape[0]
    init = (jnp.zeros(b), jnp.zeros(b), jnp.full((b,), -1, jnp.int32))
    _, adv_TB = jax.lax.scan(step, init, (rewards.T, values.T, m.T, seg.T), reverse=True)
    adv_BT = adv_TB.T
    return adv_BT, jnp.where(m, adv_BT + values, 0.0)


def group_advantages(groups: list[GroupRecord]) -> list[float]:
    """Dr. GRPO advantage of every episode, groups flattened in order."""
    rewards = np.asarray([r for g in groups for r in g.rewards], np.float32)
    ids = np.asarray([i for i, g in enumerate(groups) for _ in g.episodes], np.int32)
    return [float(a) for a in np.asarray(dr_grpo_advantages(rewards, ids, num_groups=len(groups)))]
