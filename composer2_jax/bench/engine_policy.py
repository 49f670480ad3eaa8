"""The rollout engine (`composer2_jax.infer.rollout_engine.RolloutEngine`) as a harness Policy, and loading it from
a training checkpoint.

Episodes run on many threads at once (one per sandbox); each asks for one reply at a time. Every episode thread keeps
an engine session (its context replaced by each prompt, so the cache of the common prefix — the whole previous
context in a multi-turn episode — is reused and only new tokens are prefilled; a new episode on the same thread keeps
whatever prefix it shares). Replies join the engine's continuous batch; whichever waiting thread holds the step lock
steps the engine until its own reply is done, serving the others' meanwhile. Each reply stops at `<|im_end|>` (kept:
the sampled ids are what the trainer learns from) and carries the engine's `policy_logprobs` as the behaviour
log-probs μ. Every call draws with a new seed, so repeated samples of one task differ (pass@k needs independent
samples). Like the RL rollout worker, it samples only the tokenizer's ids (`vocab_limit`): a padded model
vocabulary's extra ids cannot be decoded.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer2_jax.data import tokenizer as tk
from composer2_jax.env.harness import Completion


class EnginePolicy:
    """Harness Policy over a RolloutEngine: one session per episode thread; replies stop at <|im_end|>."""

    def __init__(self, engine: Any, stop_id: int, sampling: Any = None, policy_version: int = 0, seed: int = 0,
                 vocab_limit: int = 0):
        from composer2_jax.infer import SamplingParams  # deferred: the bench imports without jax

        self.engine, self.stop_id, self.policy_version = engine, stop_id, policy_version
        # ids ≥ vocab_limit (a model vocabulary padded beyond the tokenizer's) are never sampled; 0 = all
        self.sampling = dataclasses.replace(sampling or SamplingParams(temperature=1.0), vocab_limit=vocab_limit)
        self._seeds = itertools.count(seed)
        self._sessions: dict[int, int] = {}  # thread id → engine session
        self._lock, self._step_lock = threading.Lock(), threading.Lock()

    @property
    def max_context(self) -> int:
        """Longest prompt + reply the engine takes (its EngineConfig.max_len)."""
        return int(self.engine.ecfg.max_len)

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int) -> Completion:
        """One reply, generated in the engine's continuous batch with whatever other episodes asked for."""
        room = self.max_context - len(prompt_ids)
        if room < 1:
            raise ValueError(f"prompt of {len(prompt_ids)} tokens leaves no room in the engine's context of "
                             f"{self.max_context}; lower HarnessConfig.context_budget")
        with self._lock:
            seed = next(self._seeds)
        sid = self._session(list(prompt_ids))
        sp = dataclasses.replace(self.sampling, max_tokens=min(max_new_tokens, room), stop=((self.stop_id,),),
                                 seed=seed)
        fut = self.engine.reply(sid, sp)
        while not fut.done():
            with self._step_lock:
                if not fut.done():
                    self.engine.step()
        out = fut.result()
        return Completion(tuple(out.tokens), tuple(out.policy_logprobs), self.policy_version)

    def _session(self, prompt: list[int]) -> int:
        """This thread's session with its context set to the prompt (opened, or reopened after an eviction)."""
        me = threading.get_ident()
        sid = self._sessions.get(me)
        if sid is not None and sid in self.engine.sessions:
            self.engine.set_context(sid, prompt)
            return sid
        sid = self._sessions[me] = self.engine.open(prompt)
        return sid


def load_checkpoint(path: str | Path, engine_config: Any = None) -> tuple[Any, dict]:
    """(RolloutEngine, saved run config) from the newest step of a training checkpoint folder (params + router
    biases); `engine_config` defaults to contexts of min(max_position_embeddings, 8192) tokens."""
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp
    from flax import linen as nn

    from composer2_jax.infer.rollout_engine import RolloutEngine
    from composer2_jax.model import Transformer
    from composer2_jax.model_config import model_config
    from composer2_jax.train.checkpoint import Checkpointer

    if not Path(path).is_dir():
        raise FileNotFoundError(f"checkpoint folder {str(path)!r} does not exist; "
                                "expected e.g. runs/toy/rl/checkpoints")
    ck = Checkpointer(path, async_save=False)
    try:
        step = ck.latest_step()
        if step is None:
            raise FileNotFoundError(f"{path} holds no committed checkpoint step")
        saved = ck.manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]
        if not saved or "model" not in saved:
            raise ValueError(f"checkpoint {path} step {step} saved no run config with a 'model' section")
        cfg = model_config(saved["model"])
        abstract = nn.unbox(jax.eval_shape(lambda k: Transformer(cfg).init(k, jnp.zeros((1, 4), jnp.int32)),
                                           jax.random.key(0)))
        item = {"params": abstract["params"], "router_state": abstract.get("router_state", {})}
        state = ck.manager.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
            item, restore_args=ocp.checkpoint_utils.construct_restore_args(item), partial_restore=True)))["state"]
    finally:
        ck.close()
    return RolloutEngine(cfg, state["params"], state["router_state"], engine_config or default_engine_config(cfg),
                         version=int(step)), saved


def default_engine_config(cfg: Any) -> Any:
    """Engine shapes for evaluation: 16 slots, contexts up to min(max_position_embeddings, 8192) tokens."""
    from composer2_jax.infer.rollout_engine import EngineConfig

    max_len = min(cfg.max_position_embeddings, 8192) // 16 * 16
    return EngineConfig(slots=16, chunk=128, prefill_rows=2, page_size=16, num_pages=2 * 16 * max_len // 16,
                        max_len=max_len)


def checkpoint_tokenizer(saved: dict) -> tk.Tokenizer:
    """The tokenizer a checkpoint was trained with (its saved `tokenizer` section; byte if absent)."""
    t = saved.get("tokenizer") or {}
    return tk.make_tokenizer(t.get("name", "byte"), t.get("path") or None)
