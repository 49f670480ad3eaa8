"""The one place where numerical tolerances live. Never loosen one to make a test pass.

Levanter's convention: simple elementwise functions compare at 1e-5, whole blocks at 1e-4.
"""

# fp32 elementwise / single-op functions (norms, rope, routing weights, losses on small arrays).
FP32_FN = dict(rtol=1e-5, atol=1e-5)
# fp32 composite blocks (attention, MoE layer, one decoder layer, sharded-vs-unsharded of those).
FP32_BLOCK = dict(rtol=1e-4, atol=1e-4)
# Whole-model logits against HF/PyTorch in fp32: max |delta logit| bound from the issue.
HF_LOGITS_ATOL = 1e-4
# Sharded equivalence of the same computation on fake CPU devices (fp32): ring == dense, EP == single device.
SHARDED_FP32 = dict(rtol=1e-5, atol=1e-5)
# Sampler's behaviour log-probs μ (cached, absorbed-MLA decode of a whole model) against the trainer's full forward
# of the same tokens under router replay (fp32): two different whole-model programs, hence above FP32_BLOCK.
ROLLOUT_VS_TRAINER_LOGP_ATOL = 2e-4
# XLA cost-analysis FLOPs of two programs doing the same arithmetic in a different loop structure (the planner's
# one-piece counting mode against an explicit loop over chunks): they differ only in elementwise mask/index ops.
PLANNER_FLOP_COUNT_RTOL = 1e-2
