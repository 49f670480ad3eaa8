"""A warm pool of started sandboxes (namespaces, guest process, cgroup; no workspace yet).

Starting a sandbox costs tens of milliseconds (bwrap, namespaces, the guest's interpreter); mounting a
workspace costs under one. Keeping a few started lets create/fork only mount; the pool refills in the
background on the runtime's spawner thread.
"""

from __future__ import annotations

import collections
import secrets
import threading

from composer2_jax.env.egress_policy import EgressPolicy
from composer2_jax.env.runtime import Runtime
from composer2_jax.env.sandbox import Sandbox, SandboxError

DENY_ALL = EgressPolicy()


def new_sid() -> str:
    """A fresh sandbox id."""
    return f"sbx-{secrets.token_hex(6)}"


class SandboxPool:
    """Hands out started sandboxes (workspace or, with image=True, image sandboxes); keeps `size` of them ready."""

    def __init__(self, runtime: Runtime, size: int, image: bool = False):
        self.rt, self.size, self.image = runtime, size, image
        self._ready: collections.deque[Sandbox] = collections.deque()
        self._pending = 0
        self._closed = False
        self._cond = threading.Condition()
        self._last_error: str | None = None
        self._refill()

    def take(self, policy: EgressPolicy) -> Sandbox:
        """A started sandbox with the given egress policy (from the pool, or started now)."""
        with self._cond:
            while not self._ready and self._pending and not self._closed:
                self._cond.wait()
            sbx = self._ready.popleft() if self._ready else None
        if sbx is not None and not sbx.alive():
            sbx.close()
            sbx = None
        if sbx is None:
            sbx = self.rt.spawner.submit(Sandbox(self.rt, new_sid(), policy, self.image).start).result()
        else:
            sbx.policy = policy
            self.rt.proxy.set_policy(sbx.sid, policy)
        self._refill()
        return sbx

    def _refill(self) -> None:
        """Queue starts until ready + pending reaches the pool size."""
        with self._cond:
            while not self._closed and len(self._ready) + self._pending < self.size:
                self._pending += 1
                self.rt.spawner.submit(self._start_one)

    def _start_one(self) -> None:
        """Start one sandbox into the pool (on the spawner thread)."""
        try:
            sbx = Sandbox(self.rt, new_sid(), DENY_ALL, self.image).start()
        except SandboxError as e:
            sbx, self._last_error = None, str(e)
        with self._cond:
            self._pending -= 1
            if sbx is not None and self._closed:
                sbx.close()
            elif sbx is not None:
                self._ready.append(sbx)
            self._cond.notify_all()

    def ready(self) -> int:
        """How many started sandboxes wait in the pool."""
        with self._cond:
            return len(self._ready)

    def close(self) -> None:
        """Stop refilling and close the waiting sandboxes."""
        with self._cond:
            self._closed = True
            waiting, self._ready = list(self._ready), collections.deque()
            self._cond.notify_all()
        for sbx in waiting:
            sbx.close()
