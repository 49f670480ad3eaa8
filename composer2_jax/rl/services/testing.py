"""Test and benchmark helpers: a scripted rollout worker, a counting trainer, a faulty environment, a micro model.

They stand in for the JAX services where a test is about orchestration (staleness, faults, resumption), so those
tests run in seconds; the real services are covered by their own tests.
"""

from __future__ import annotations

import random
import re
import threading
import time
from typing import Any, Callable

import numpy as np

from composer2_jax.bench.policies import call
from composer2_jax.data import tokenizer as tk
from composer2_jax.rl.records import GroupRecord, summarize_groups
from composer2_jax.rl.services.rollout import Generation
from composer2_jax.rl.services.staleness import is_fresh
from composer2_jax.rl.services.weights import Weights, WeightStore
from composer2_jax.rl.tasks import FILE

_EASY = re.compile(r"In calc\.py, (\w+) has a bug: a (\S) b should be a (\S) b")
_HARD = re.compile(r"In calc\.py, (\w+) should return a (\S) b")


def micro_model_config(**overrides):
    """A two-layer MoE (one dense, one routed layer) small enough to compile in seconds; byte-tokenizer vocab; no MTP
    modules unless `num_mtp_layers` says so (the RL loss trains the trunk)."""
    from composer2_jax.model_config import get_model_config

    kw = dict(vocab_size=tk.ByteTokenizer().vocab_size, hidden_size=32, num_layers=2, num_heads=2, q_lora_rank=16,
              kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, intermediate_size=64,
              moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
              num_mtp_layers=0)
    return get_model_config("toy", **{**kw, **overrides})


def scripted_reply(context: str, correct: bool) -> str:
    """What an oracle-like agent says next in a calc task context (a wrong-but-wellformed fix if not `correct`)."""
    user = context.rsplit(f"{tk.IM_USER}user{tk.IM_MIDDLE}", 1)[-1]
    easy, hard = _EASY.search(user), _HARD.search(user)
    if easy:
        name, wrong, right = easy.groups()
    elif hard and "read_file" in context.split(tk.IM_ASSISTANT, 1)[-1]:
        name, right = hard.groups()
        found = re.search(rf"def {name}\(a, b\): return a (\S) b", context)
        wrong = found.group(1) if found else "+"
    elif hard:
        return call("read_file", path=FILE)
    else:
        return "I cannot tell what to fix."
    new = right if correct else next(op for op in "+-*%" if op not in (right, wrong))
    return call("edit_file", path=FILE, old_string=f"{name}(a, b): return a {wrong} b",
                new_string=f"{name}(a, b): return a {new} b") + call("submit")


class ScriptedRollout:
    """Stands in for RolloutWorker: oracle-like replies (right with probability p_correct) after a drawn latency,
    stamped with the store's current version. `inject_fault` kills the serving thread at the next request."""

    def __init__(self, store: WeightStore, p_correct: float = 0.7,
                 latency: Callable[[random.Random], float] | None = None, seed: int = 0):
        self.store, self.p_correct = store, p_correct
        self.latency = latency or (lambda rng: 0.0)
        self.tok = tk.ByteTokenizer()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._fault: BaseException | None = None
        self._closed: BaseException | None = None
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.calls = 0

    def start(self, stop: threading.Event) -> threading.Thread:
        """A serving thread that lives until `stop` or a fault."""
        self._stop = threading.Event()
        self.thread = threading.Thread(target=lambda: _wait_either(stop, self._stop), daemon=True, name="scripted")
        self.thread.start()
        return self.thread

    def inject_fault(self, error: BaseException) -> None:
        """The next request fails with `error` and the serving thread exits."""
        self._fault = error

    def close(self, error: BaseException) -> None:
        """Refuse further requests."""
        self._closed = error

    def generate(self, prompt: list[int], max_new_tokens: int) -> Generation:
        """One reply (raises while the serving thread is dead, as the real worker's futures do)."""
        if self._closed is not None:
            raise self._closed
        with self._lock:
            fault, self._fault = self._fault, None
            correct, delay = self._rng.random() < self.p_correct, self.latency(self._rng)
            self.calls += 1
        if fault is not None:
            self._stop.set()
            raise fault
        if self.thread is not None and not self.thread.is_alive():
            raise RuntimeError("the rollout worker is dead")
        version = self.store.version
        time.sleep(delay)
        text = scripted_reply(self.tok.decode(prompt), correct) + tk.IM_END
        ids = tuple(self.tok.encode(text, allow_special=True)[:max_new_tokens])
        return Generation(ids, (-0.1,) * len(ids), version, None, None)


def _wait_either(a: threading.Event, b: threading.Event) -> None:
    """Return when either event is set."""
    while not b.is_set() and not a.wait(0.02):
        continue  # a.wait blocks up to 20 ms per round


class CountingTrainer:
    """Stands in for Trainer: 'trains' by counting, checks the staleness bound, takes `step_s` per version."""

    def __init__(self, eta: int, step_s: float = 0.0, model_cfg: Any = None):
        self.eta, self.step_s, self.version = eta, step_s, 0
        self.model_cfg = model_cfg or _NoMoE()
        self.num_moe = 0
        self.consumed: list[list[GroupRecord]] = []
        self.violations = 0

    def weights(self) -> Weights:
        return Weights(self.version, {"w": np.float32(self.version)}, {})

    def train(self, groups: list[GroupRecord]) -> dict[str, Any]:
        """Record the batch and the staleness of its tokens; version += 1."""
        self.violations += sum(not is_fresh(e.min_version, self.version, self.eta) for g in groups
                               for e in g.episodes if e.min_version >= 0)
        lags = [self.version - e.min_version for g in groups for e in g.episodes if e.min_version >= 0]
        time.sleep(self.step_s)
        self.consumed.append(groups)
        self.version += 1
        return {"version": self.version, "staleness_max": float(max(lags, default=0)),
                **{f"batch/{k}": v for k, v in summarize_groups(groups).items()}}


class _NoMoE:
    num_experts_per_tok = 1


class FaultyEnv:
    """An Environment wrapper whose `call` raises on the calls `fail(n)` selects (n counts every tool call)."""

    def __init__(self, env: Any, fail: Callable[[int], bool]):
        self.env, self.fail, self.n = env, fail, 0
        self._lock = threading.Lock()
        self.raised = 0

    def call(self, sid, tool, args=None):
        """The env's call, or a RuntimeError (a worker dying mid-episode)."""
        with self._lock:
            self.n += 1
            boom = self.fail(self.n)
            self.raised += boom
        if boom:
            raise RuntimeError(f"injected environment fault at call {self.n} ({tool})")
        return self.env.call(sid, tool, args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)
