"""The base experiment config every stage derives from (one level deep), with a comment on every key."""

from __future__ import annotations

import ml_collections

from composer2_jax import config as model_presets
from composer2_jax.data.pipeline import base_data_config
from composer2_jax.train.optim import optim_config_dict

# Per-preset run sizes: (batch, seq_len, steps, mesh). toy runs on a 2-core CPU in about a minute.
RUN_SIZES = {
    "toy": dict(batch=8, seq_len=128, steps=60, mesh=dict(fsdp=-1)),
    "gpu_small": dict(batch=8, seq_len=8192, steps=1000, mesh=dict(fsdp=-1)),
    "kimi_k2_5": dict(batch=2048, seq_len=32768, steps=100000, mesh=dict(data=1, fsdp=-1, expert=64)),
    "kimi_k2": dict(batch=2048, seq_len=32768, steps=100000, mesh=dict(data=1, fsdp=-1, expert=64)),
    "deepseek_v3": dict(batch=2048, seq_len=32768, steps=100000, mesh=dict(data=1, fsdp=-1, expert=64)),
}


def get_base_config(preset: str = "toy") -> ml_collections.ConfigDict:
    """Model preset + optimizer + step + data + mesh + checkpoint + logging for one training stage."""
    if preset not in RUN_SIZES:
        raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(RUN_SIZES)}")
    size = RUN_SIZES[preset]
    c = ml_collections.ConfigDict()
    c.preset = preset  # which architecture/run-size preset this config was built from
    c.model = model_presets.preset(preset)  # the architecture (composer2_jax/config.py documents each key)
    c.optim = optim_config_dict()  # optimizer and schedule (composer2_jax/train/optim.py)
    c.optim.total_steps = size["steps"]
    c.step = ml_collections.ConfigDict(dict(
        grad_accum=1,  # micro-batches per step (the global batch is split, gradients summed)
        loss_chunk=1024,  # tokens per chunk of the chunked cross-entropy (peak logits memory = chunk × vocab)
        balance_loss_weight=1e-4,  # α of the sequence-wise MoE balance loss (DeepSeek-V3: 1e-4)
        z_loss_weight=0.0,  # weight of the logsumexp² z-loss (0 = off)
        router_bias_rate=1e-3,  # γ of the aux-loss-free routing-bias update (DeepSeek-V3: 1e-3)
        skip_nonfinite=False,  # NaN/inf loss: False stops the run naming the step; True skips the update
    ))
    c.step.mtp = ml_collections.ConfigDict(dict(  # MTP loss (losses/mtp.py); active only when model.num_mtp_layers > 0
        weight=0.3,  # λ in L_MTP = λ/D Σ_k (ce_weight·CE_k + distill_weight·KL_k) before switch_step (DeepSeek: 0.3)
        final_weight=0.1,  # λ after the switch (DeepSeek-V3: 0.1 for the last 4.8T of 14.8T tokens)
        switch_step=-1,  # step where λ starts moving to final_weight; -1 = keep `weight` throughout
        ramp_steps=0,  # steps of the linear move from weight to final_weight (0 = a step change)
        ce_weight=1.0,  # weight of each depth's cross-entropy on t_{i+k+1}
        distill_weight=0.0,  # weight of the self-distillation KL(sg[p_main(·|x≤i+k)] ‖ q_k(·|i))
        distill_top_n=0,  # 0 = full-vocabulary KL; N = teacher renormalised over its top-N tokens
        detach_trunk=False,  # stop the MTP loss's gradient into the trunk and the shared embedding/head
    ))
    c.data = base_data_config()  # sources, packing, mixture, shuffling (composer2_jax/data/pipeline.py)
    c.data.batch_size = size["batch"]
    c.data.seq_len = size["seq_len"]
    c.data_shard_by = "documents"  # multi-process data split: documents (scales) | rows (same batches for any host count)
    c.tokenizer = ml_collections.ConfigDict(dict(
        name="byte",  # byte | tiktoken (Kimi's tiktoken.model format)
        path="",  # tokenizer file for tiktoken
    ))
    c.mesh = ml_collections.ConfigDict(dict(data=1, fsdp=1, expert=1, tensor=1, context=1))  # -1 = the rest
    c.mesh.update(size["mesh"])
    c.steps = size["steps"]  # train until this global step
    c.seed = 0  # parameter-init seed
    c.workdir = f"runs/{preset}"  # checkpoints/ and logs/ go here; an existing checkpoint there is resumed
    c.init_from = ""  # checkpoint dir of a previous stage to take params + router biases from (fresh optimizer)
    c.chip = ""  # accelerator name for MFU (h200, h100, b200, v5p, v6e, cpu); empty = detect
    c.checkpoint = ml_collections.ConfigDict(dict(
        every=20,  # save every N steps (and at the end)
        keep=3,  # checkpoints kept
        async_save=True,  # save in the background while training continues
        fallback=True,  # if the newest checkpoint is corrupt, log it and resume from the previous one
    ))
    c.log = ml_collections.ConfigDict(dict(
        every=10,  # fetch and write metrics every N steps
        write=True,  # TensorBoard events + metrics.jsonl under workdir/logs
        progress=True,  # tqdm progress bar with tokens/s and ETA
    ))
    return c
