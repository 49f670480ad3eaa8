"""Weight sync between the trainer process and a rollout process of one jax.distributed job, device to device.

The two processes' devices form one global mesh `role × shard` (role 0: the trainer process's local devices, role 1:
the rollout process's, `shard` over each process's n devices). Publishing version t:

  1. trainer: every leaf of (params, router state) is flattened, padded to a multiple of n and laid out [1, n, m]
     one row per local device (a jitted reshard on the trainer's own devices; nothing leaves them).
  2. announce: the trainer writes t under the next sequence number in the coordination service's key-value store
     and waits until the rollout process says it is ready (the receiver joins between engine steps; both then enter
     the collective together — gloo gives up on a peer more than 30 s late).
  3. transfer: both processes run one jitted `shard_map` program over the global mesh: a `ppermute` along `role`
     (0 → 1) of every leaf's rows. Gloo moves them on CPU, NCCL on GPU: no host round trip on the device path.
  4. rollout: its rows are reassembled [1, n, m] on its own devices and unflattened (jitted, on those devices); the
     engines then reshard them onto their meshes as for any published version (`RolloutEngine.update_weights`).

The bytes are the trainer's, in the trainer's dtype: the engines hold its parameters bit for bit. The receiver
takes part in every announced version in order (a collective needs both sides); `latest()` returns the newest.
The tree's shapes and dtypes travel once, at the first publication, through the key-value store.

Why a collective: `jax.device_put` of an array on the trainer process's devices to a sharding on the rollout
process's needs `jax_cross_host_transfer_socket_address` set (a socket transfer outside the collectives); the
collective needs no flag and is what NCCL runs on GPU (what was measured, on which jax: docs/rl.md,
"Device-to-device weight sync").
"""

from __future__ import annotations

import math
import pickle

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from composer2_jax.rl.services.weights import Weights
from composer2_jax.train import distributed

ROW = P(None, "shard")  # a leaf's [1, n, m] rows on one process's devices
ROLE_ROW = P("role", "shard")  # the same rows of both processes, [2, n, m] over the global mesh


def check_one_job(trainer_process: int, rollout_process: int) -> int:
    """Devices per process of the pair; a clear error unless both are processes of this jax.distributed job."""
    count = jax.process_count()
    if count < 2 or distributed.kv_client() is None:
        raise ValueError(f"weight_sync='device' needs the trainer and rollout processes in one jax.distributed job "
                         f"(composer2_jax.train.distributed.initialize, e.g. python -m launch.local); this process "
                         f"sees jax.process_count()={count}. Use weight_sync='object_store' otherwise")
    for name, p in (("trainer_process", trainer_process), ("rollout_process", rollout_process)):
        if not 0 <= p < count:
            raise ValueError(f"{name}={p} is not a process of this job (0 .. {count - 1})")
    if trainer_process == rollout_process:
        raise ValueError(f"trainer_process and rollout_process are both {trainer_process}; expected two processes")
    sizes = [sum(d.process_index == p for d in jax.devices()) for p in (trainer_process, rollout_process)]
    if sizes[0] != sizes[1]:
        raise ValueError(f"the trainer process has {sizes[0]} devices and the rollout process {sizes[1]}; the "
                         f"role × shard transfer mesh needs the same number on both")
    return sizes[0]


def _devices_of(process: int) -> list:
    return sorted((d for d in jax.devices() if d.process_index == process), key=lambda d: d.id)


class _Channel:
    """The pair's global mesh, the tree's row layout and the compiled transfer program (both sides build the same)."""

    def __init__(self, name: str, trainer_process: int, rollout_process: int):
        self.name = name
        self.n = check_one_job(trainer_process, rollout_process)
        self.kv = distributed.kv_client()
        self.mesh = Mesh(np.array([_devices_of(trainer_process), _devices_of(rollout_process)]), ("role", "shard"))
        self.local = Mesh(np.array(jax.local_devices()[:self.n]), ("shard",))
        self.seq = 0
        self.spec = None  # the tree of jax.ShapeDtypeStruct, set by `_layout`

    def key(self, what: str, seq: int | None = None) -> str:
        return f"c2j/device_sync/{self.name}/{what}" + ("" if seq is None else f"/{seq}")

    def _layout(self, spec) -> None:
        """Row widths and the transfer program for this tree of shapes and dtypes."""
        self.spec = spec
        self.leaves, self.treedef = jax.tree.flatten(spec)
        self.widths = [max(1, -(-math.prod(s.shape) // self.n)) for s in self.leaves]
        rows = tuple(NamedSharding(self.local, ROW) for _ in self.leaves)

        def pack(*xs):  # each leaf → [1, n, m], one row per local device
            return tuple(jnp.pad(x.reshape(-1), (0, self.n * m - x.size)).reshape(1, self.n, m)
                         for x, m in zip(xs, self.widths))

        def unpack(*rs):
            return tuple(r.reshape(-1)[:math.prod(s.shape)].reshape(s.shape) for r, s in zip(rs, self.leaves))

        def send_rows(*rs_):  # per shard [1, 1, m]: role 0's rows to role 1
            return tuple(jax.lax.ppermute(r_, "role", perm=[(0, 1)]) for r_ in rs_)

        self.pack = jax.jit(pack, out_shardings=rows)
        self.unpack = jax.jit(unpack)
        specs = tuple(ROLE_ROW for _ in self.leaves)
        self.transfer = jax.jit(jax.shard_map(send_rows, mesh=self.mesh, in_specs=specs, out_specs=specs))
        self.global_shapes = [(2, self.n, m) for m in self.widths]
        self.global_sharding = NamedSharding(self.mesh, ROLE_ROW)

    def run(self, rows: tuple) -> tuple:
        """The collective: local rows [1, n, m] per leaf in, this process's received rows out (same layout)."""
        glob = [jax.make_array_from_single_device_arrays(shape, self.global_sharding,
                                                         [s.data for s in sorted(r.addressable_shards,
                                                                                 key=lambda s: s.device.id)])
                for r, shape in zip(rows, self.global_shapes)]
        out = self.transfer(*glob)
        local = NamedSharding(self.local, ROW)
        return tuple(jax.make_array_from_single_device_arrays((1, self.n, m), local,
                                                              [s.data for s in o.addressable_shards])
                     for o, m in zip(out, self.widths))


class DeviceWeightSender:
    """The trainer process's side: `publish(weights)` moves them onto the rollout process's devices (blocks until it
    took part)."""

    def __init__(self, name: str = "rollout", trainer_process: int = 0, rollout_process: int = 1,
                 timeout_s: float = 3600.0):
        self.channel = _Channel(name, trainer_process, rollout_process)
        self.timeout_ms = int(timeout_s * 1000)
        self.version = -1

    def publish(self, weights: Weights) -> None:
        """Announce `weights.version`, wait for the receiver, run the transfer."""
        if weights.version <= self.version:
            raise ValueError(f"published version {weights.version} does not exceed the current {self.version}")
        c = self.channel
        tree = (weights.params, weights.router_state)
        if c.spec is None:
            spec = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), tree)
            c._layout(spec)
            c.kv.key_value_set_bytes(c.key("spec"), pickle.dumps(spec))
        here = set(c.local.devices.flat)  # leaves on other devices (a one-device trainer) are copied onto these
        rows = c.pack(*(x if isinstance(x, jax.Array) and x.sharding.device_set == here
                        else jax.device_put(x, NamedSharding(c.local, P())) for x in jax.tree.leaves(tree)))
        c.kv.key_value_set(c.key("announce", c.seq), str(weights.version))
        c.kv.blocking_key_value_get(c.key("ready", c.seq), self.timeout_ms)
        jax.block_until_ready(c.run(rows))
        c.seq += 1
        self.version = weights.version


class DeviceWeightReceiver:
    """The rollout process's side, with the WeightStore interface a RolloutWorker reads: `latest()` takes part in
    every version announced since the last call and returns the newest (on this process's devices)."""

    def __init__(self, name: str = "rollout", trainer_process: int = 0, rollout_process: int = 1,
                 timeout_s: float = 3600.0):
        self.channel = _Channel(name, trainer_process, rollout_process)
        self.timeout_ms = int(timeout_s * 1000)
        self._weights: Weights | None = None
        self._blank = None  # this process's (unused) role-1 input rows
        self.received = 0  # transfers taken part in

    @property
    def version(self) -> int:
        """Newest version received (−1 before the first)."""
        return -1 if self._weights is None else self._weights.version

    def _announced(self, block: bool) -> int | None:
        c = self.channel
        if block:
            return int(c.kv.blocking_key_value_get(c.key("announce", c.seq), self.timeout_ms))
        try:
            return int(c.kv.key_value_try_get(c.key("announce", c.seq)))
        except Exception:  # noqa: BLE001 - the client raises NOT_FOUND for a key not set yet
            return None

    def _receive(self, version: int) -> None:
        c = self.channel
        if c.spec is None:
            c._layout(pickle.loads(c.kv.blocking_key_value_get_bytes(c.key("spec"), self.timeout_ms)))
            self._blank = tuple(jax.device_put(np.zeros((1, c.n, m), s.dtype), NamedSharding(c.local, ROW))
                                for s, m in zip(c.leaves, c.widths))
        c.kv.key_value_set(c.key("ready", c.seq), "1")
        leaves = c.unpack(*c.run(self._blank))
        params, router_state = jax.tree.unflatten(c.treedef, leaves)
        self._weights = Weights(version, params, router_state)
        c.seq += 1
        self.received += 1

    def latest(self) -> Weights:
        """The newest weights, after taking part in every announced transfer (waits for the first one)."""
        version = self._announced(block=self._weights is None)
        while version is not None:
            self._receive(version)
            version = self._announced(block=False)
        return self._weights

    def wait_for(self, version: int, timeout_s: float | None = None) -> Weights:
        """Take part in announced transfers until holding `version` or newer (waiting up to `timeout_s` for each)."""
        timeout_ms = self.timeout_ms if timeout_s is None else int(timeout_s * 1000)
        c = self.channel
        while self.version < version:
            self._receive(int(c.kv.blocking_key_value_get(c.key("announce", c.seq), timeout_ms)))
        return self.latest()
