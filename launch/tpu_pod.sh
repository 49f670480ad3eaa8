#!/usr/bin/env bash
# Run an experiment on every worker of a Cloud TPU pod slice (v5p / v6e).
#
#   launch/tpu_pod.sh TPU_NAME ZONE experiments.cpt_bulk --config=experiments/cpt_bulk.py:kimi_k2_5 \
#       --config.workdir=gs://BUCKET/runs/kimi_cpt_bulk
#
# Every worker runs the same command; composer2_jax.train.distributed.initialize() calls
# jax.distributed.initialize(), which reads the pod topology from the TPU metadata. Multi-slice (DCN) runs set
# MEGASCALE_* through the queued-resources API; the `data` mesh axis then spans slices.
# Checkpoints and logs must go to storage every worker sees (gs://...); metrics are written by worker 0 only.
set -euo pipefail
TPU_NAME=$1; ZONE=$2; MODULE=$3; shift 3
REPO_URL=${REPO_URL:-$(git config --get remote.origin.url || true)}
BRANCH=${BRANCH:-main}
gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone "$ZONE" --worker=all --command "
  set -e
  if [ ! -d composer2_jax ]; then git clone --branch $BRANCH $REPO_URL composer2_jax; fi
  cd composer2_jax && git pull --ff-only
  python3 -m pip install -q -r requirements.txt 'jax[tpu]' -f https://storage.googleapis.com/jax-releases/libtpu_releases.html
  python3 -m $MODULE $*
"
