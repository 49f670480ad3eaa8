"""The inference engine (`composer2_jax.infer.Engine`) as a harness Policy, and loading it from a training checkpoint.

Episodes run on many threads at once (one per sandbox); each asks for one reply at a time. `EnginePolicy` batches
the requests that arrive together into one `Engine.generate` call (up to `max_batch`, after waiting `wait_s` for
company), so parallel sandboxes share the accelerator. Each reply stops at `<|im_end|>` (kept: the sampled ids are
what the trainer learns from) and carries the engine's `policy_logprobs` as the behaviour log-probs μ. Every call
draws with a new seed, so repeated samples of one task differ (pass@k needs independent samples). Like the RL rollout
engine, it samples only the tokenizer's ids (`vocab_limit`): a padded model vocabulary's extra ids cannot be decoded.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer2_jax.data import tokenizer as tk
from composer2_jax.env.harness import Completion


@dataclasses.dataclass
class _Request:
    """One reply asked for by one episode thread."""

    prompt: list[int]
    max_new_tokens: int
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: Completion | None = None
    error: BaseException | None = None


class EnginePolicy:
    """Harness Policy over an Engine: concurrent requests are batched; replies stop at <|im_end|>."""

    def __init__(self, engine: Any, stop_id: int, sampling: Any = None, policy_version: int = 0,
                 max_batch: int = 16, wait_s: float = 0.01, seed: int = 0, vocab_limit: int = 0):
        from composer2_jax.infer import SamplingParams  # deferred: the bench imports without jax

        self.engine, self.stop_id, self.policy_version = engine, stop_id, policy_version
        # ids ≥ vocab_limit (a model vocabulary padded beyond the tokenizer's) are never sampled; 0 = all
        self.sampling = dataclasses.replace(sampling or SamplingParams(temperature=1.0), vocab_limit=vocab_limit)
        self.max_batch, self.wait_s = max_batch, wait_s
        self._seeds = itertools.count(seed)
        self._pending: list[_Request] = []
        self._lock, self._run_lock = threading.Lock(), threading.Lock()

    @property
    def max_context(self) -> int:
        """Longest prompt + reply the model takes (its max_position_embeddings)."""
        return int(self.engine.cfg.max_position_embeddings)

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int) -> Completion:
        """One reply, generated in a batch with whatever other episodes asked for meanwhile."""
        room = self.max_context - 16 * -(-len(prompt_ids) // 16)  # the engine pads prompts to multiples of 16
        if room < 1:
            raise ValueError(f"prompt of {len(prompt_ids)} tokens leaves no room in the model's context of "
                             f"{self.max_context}; lower HarnessConfig.context_budget")
        req = _Request(list(prompt_ids), min(max_new_tokens, room))
        with self._lock:
            self._pending.append(req)
        time.sleep(self.wait_s)
        while not req.done.is_set():
            with self._run_lock:
                with self._lock:
                    batch, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
                if batch:
                    self._run(batch)
        if req.error is not None:
            raise req.error
        return req.result

    def _run(self, batch: list[_Request]) -> None:
        """One Engine.generate over a batch; each request gets its own cut of the output (or the error)."""
        sp = dataclasses.replace(self.sampling, max_tokens=max(r.max_new_tokens for r in batch),
                                 stop=((self.stop_id,),), seed=next(self._seeds))
        try:
            outs = self.engine.generate([r.prompt for r in batch], sp)
            for r, out in zip(batch, outs):
                n = r.max_new_tokens
                r.result = Completion(tuple(out.tokens[:n]), tuple(out.policy_logprobs[:n]), self.policy_version)
        except Exception as e:  # noqa: BLE001 - handed to every waiting episode, raised in its own thread
            for r in batch:
                r.error = e
        for r in batch:
            r.done.set()


def load_checkpoint(path: str | Path) -> tuple[Any, dict]:
    """(Engine, saved run config) from the newest step of a training checkpoint folder (params + router biases)."""
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp
    from flax import linen as nn

    from composer2_jax.config import model_config
    from composer2_jax.infer import Engine
    from composer2_jax.model import Transformer
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
    return Engine(cfg, state["params"], state["router_state"]), saved


def checkpoint_tokenizer(saved: dict) -> tk.Tokenizer:
    """The tokenizer a checkpoint was trained with (its saved `tokenizer` section; byte if absent)."""
    t = saved.get("tokenizer") or {}
    return tk.make_tokenizer(t.get("name", "byte"), t.get("path") or None)
