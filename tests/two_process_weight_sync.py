"""Two processes of one jax.distributed job (run by tests/test_rl_device_sync.py):

    python -m launch.local --processes 2 --devices_per_process 4 tests.two_process_weight_sync OUT

Process 0 trains (TC: fsdp=2 × expert=2 on its 4 devices) and publishes versions 0, 1, 2 with a DeviceWeightSender;
process 1 serves one episode on an expert=2 × tensor=2 engine over its own 4 devices, reading a
DeviceWeightReceiver. Version 1 is published while the episode's first reply is being decoded, version 2 between its
two turns. Each side writes what it holds after each version to OUT (the test compares them) and process 1 the
per-token versions of both replies.
"""

import json
import sys
from pathlib import Path

from composer2_jax.train import distributed

distributed.initialize()  # before any other JAX use

import jax  # noqa: E402
import numpy as np  # noqa: E402

from composer2_jax.rl.services.device_sync import DeviceWeightReceiver, DeviceWeightSender  # noqa: E402
from composer2_jax.rl.services.rollout import RolloutWorker  # noqa: E402
from composer2_jax.rl.services.trainer import Trainer  # noqa: E402
from tests.test_rl_placement import CFG, OC, PLACEMENTS, STOP, TC  # noqa: E402
from tests.test_rl_sharded import _groups  # noqa: E402

PROMPT = list(range(3, 12))


def save(path: Path, params) -> None:
    """Host copies of every leaf, keyed by its path."""
    flat = jax.tree_util.tree_flatten_with_path(jax.device_get(params))[0]
    np.savez(path, **{jax.tree_util.keystr(k): np.asarray(v) for k, v in flat})


def signal(name: str) -> None:
    distributed.kv_client().key_value_set(f"c2j/test/{name}", "1")


def wait(name: str) -> None:
    distributed.kv_client().blocking_key_value_get(f"c2j/test/{name}", 600_000)


def trainer_process(out: Path) -> None:
    trainer = Trainer(CFG, OC, TC, seed=0)
    assert {d.process_index for leaf in jax.tree.leaves(trainer.state.params) for d in leaf.sharding.device_set} == {0}
    sender = DeviceWeightSender()
    sender.publish(trainer.weights())
    save(out / "trainer_0.npz", trainer.state.params)
    for version in (1, 2):
        trainer.train(_groups())
        wait(f"publish_{version}")
        sender.publish(trainer.weights())
        save(out / f"trainer_{version}.npz", trainer.state.params)


def rollout_process(out: Path) -> None:
    receiver = DeviceWeightReceiver()
    worker = RolloutWorker(CFG, receiver, PLACEMENTS["colocated"], stop_id=STOP, vocab_limit=STOP)
    first = worker.submit(PROMPT, 20, session="episode")
    for _ in range(5):  # prefill + first token, then 4 decode steps under version 0
        worker.step()
    [engine] = worker.engines
    assert {d.process_index for d in engine.devices} == {1} and len(engine.devices) == 4
    save(out / "engine_0.npz", engine.params)
    signal("publish_1")
    receiver.wait_for(1)  # the transfer, while the reply is mid-decode
    while worker.step():
        pass
    save(out / "engine_1.npz", engine.params)
    a = first.result()
    signal("publish_2")
    receiver.wait_for(2)  # between the episode's two turns
    second = worker.submit(PROMPT + list(a.ids) + [5, 6], 6, session="episode")
    while worker.step():
        pass
    save(out / "engine_2.npz", engine.params)
    b = second.result()
    record = {"versions": [list(a.versions), list(b.versions)], "engine_version": engine.version,
              "sync_s": engine.sync_s, "received": receiver.received}
    (out / "rollout.json").write_text(json.dumps(record))


if __name__ == "__main__":
    out_dir = Path(sys.argv[1])
    (trainer_process if jax.process_index() == 0 else rollout_process)(out_dir)
    distributed.barrier("two_process_weight_sync_done")
