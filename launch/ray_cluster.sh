#!/usr/bin/env bash
# Ray cluster for asynchronous RL across machines (docs/rl.md, "Many machines").
#
#   head node (trainer):       launch/ray_cluster.sh head [GPUS]
#   inference node:            launch/ray_cluster.sh rollout HEAD_IP [GPUS]
#   environment (CPU) node:    launch/ray_cluster.sh env HEAD_IP [ENV_ACTORS]
#   then, on the head:         launch/ray_cluster.sh run ROLLOUT_ACTORS ENV_ACTORS [--config.key=value ...]
#   tear down (every node):    launch/ray_cluster.sh stop
#
# Where the services go:
#   head     the driver: Trainer (the head's accelerators), staleness gate, group buffer, checkpoints, evaluator,
#            and the WeightRegistry actor (weights published by version; rollout actors pull new versions)
#   rollout  one RolloutActor per GPU (custom resource "rollout"): the inference engine, batching the replies of
#            every episode that asks it
#   env      ENV_ACTORS EnvActors (custom resource "sandbox"): bubblewrap sandboxes, the harness loop, grading,
#            rewards. These nodes need root, Linux >= 5.2 and bubblewrap (docs/env.md, "Host requirements").
# Every node needs this repository at the same path and its Python dependencies plus ray (requirements-dev.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${RAY_PORT:-6379}
role=${1:-}
case "$role" in
  head)
    gpus=${2:-0}
    ray start --head --port "$PORT" --num-gpus "$gpus" --resources '{"trainer": 1}' --include-dashboard=false
    ;;
  rollout)
    head=$2; gpus=${3:-1}
    ray start --address "$head:$PORT" --num-gpus "$gpus" --resources "{\"rollout\": $gpus}"
    ;;
  env)
    head=$2; actors=${3:-4}
    if ! command -v bwrap >/dev/null; then echo "env nodes need bubblewrap (apt-get install -y bubblewrap)" >&2; exit 1; fi
    ray start --address "$head:$PORT" --resources "{\"sandbox\": $actors}"
    ;;
  run)
    rollouts=$2; envs=$3; shift 3
    python -m experiments.rl --config.rl.backend=ray --config.rl.ray.address=auto \
      --config.rl.ray.rollout_actors="$rollouts" --config.rl.ray.env_actors="$envs" \
      --config.rl.ray.rollout_resources.num_gpus=1 --config.rl.ray.rollout_resources.resources.rollout=1 \
      --config.rl.ray.env_resources.resources.sandbox=1 "$@"
    ;;
  stop)
    ray stop
    ;;
  *)
    sed -n '2,19p' "$0"; exit 2
    ;;
esac
