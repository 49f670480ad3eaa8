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
# FP8 (model/fp8.py) gradient of one computation under two layouts (expert-parallel vs one device), relative Frobenius
# distance. The fp32 operands of a GEMM differ by rounding (SHARDED_FP32) between layouts, and a rounding difference
# moves an element across an e4m3 rounding boundary (or a tile's amax by one ulp): that element then changes by one
# e4m3 step, at most 2^-3 of itself (3 mantissa bits). Exceeding 2^-7 = 2^-3 · 2^-4 needs the flipped elements to
# carry over 1/16 of the gradient's norm; the toy expert Wgrads measured 4e-5 and 2.5e-4 (2026-12-06, 2-core CPU).
FP8_RELAYOUT_GRAD_RTOL = 2.0 ** -7
# FP8 training against the bf16 option (same model, data and seeds): per-step relative loss gap |l8 − l16| / l16,
# checked on the mean of windows of steps. Each FFN GEMM's output is within 2u + u² ≈ 0.13 (u = 2^-4) of the
# exact product elementwise in the worst case, and about u/√3·√2 ≈ 5 % in RMS for uncorrelated rounding; the loss
# is a smooth function of many such outputs and their errors average, so the loss gap sits far below either. 2 %
# is the bar DeepSeek-V3 §3.3 reports its FP8 runs stayed within (relative loss error below 0.25 %) times 8,
# headroom for a toy model whose 128-channel tiles are whole rows; the benchmark (benchmarks/learning/fp8_vs_bf16.py,
# benchmarks/RESULTS.md) measured at most 0.372 % per 25-step window over 300 steps (2026-12-06, 2-core CPU).
FP8_VS_BF16_LOSS_RTOL = 2e-2
# `--dry_run_depth=extrapolate` (composer2_jax/plan/extrapolate.py) against the full compile of the same step: relative
# error of the per-device peak. Both are XLA's own memory_analysis of the real step; the estimate extrapolates the
# resident bytes (exactly linear) and the loop's temporaries (linear from two units on) and takes the update's
# from its own full-depth compile, so what remains is buffer-assignment noise between depths. 10 % is the bar a
# fit decision can live with (the CPU compile itself overestimates by about 2×, plan/calibration.py); the old
# 1-/2-unit line missed gpu_small cpt_bulk's 128.0 GB by 2.09× (2026-12-07, 2-core CPU, docs/scaling.md).
DRY_RUN_EXTRAPOLATED_PEAK_RTOL = 0.10
