"""Dequantization of the released checkpoint formats (vectorised numpy; tests check them against naive loops).

- FP8 block scaling (DeepSeek-V3, Kimi K2 release; `quant_method: fp8`, `weight_block_size: [128, 128]`):
  `W.weight` float8_e4m3fn [O, I] and `W.weight_scale_inv` fp32 [ceil(O/bo), ceil(I/bi)];
  w[o, i] = q[o, i] · s[o // bo, i // bi]   (DeepSeek-V3 inference/kernel.py `weight_dequant`).
- int4 "pack-quantized" (compressed-tensors, Kimi K2 Thinking / K2.5 experts; symmetric int, group size g = 32):
  `W.weight_packed` int32 [O, ceil(I/8)], `W.weight_scale` [O, ceil(I/g)], `W.weight_shape` [2] = (O, I);
  value i of a row sits in bits 4·(i mod 8) .. 4·(i mod 8)+3 of word i // 8 as the unsigned u = q + 8, so
  q = u − 8 ∈ [−8, 7] and w[o, i] = q · scale[o, i // g]   (compressed_tensors `unpack_from_int32`).
The products are computed in float32 and rounded once to the requested dtype.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

FP8_BLOCK = (128, 128)
INT4_GROUP = 32


def dequant_fp8_block(q_OI: np.ndarray, scale_inv: np.ndarray, block=FP8_BLOCK, dtype=np.float32) -> np.ndarray:
    """Block-scaled FP8 weight [O, I] → dtype."""
    o, i = q_OI.shape
    bo, bi = block
    want = (-(-o // bo), -(-i // bi))
    if tuple(scale_inv.shape) != want:
        raise ValueError(f"weight_scale_inv has shape {list(scale_inv.shape)}; expected {list(want)} for a "
                         f"[{o}, {i}] weight with {bo}x{bi} blocks")
    s = np.repeat(np.repeat(scale_inv.astype(np.float32), bo, axis=0), bi, axis=1)[:o, :i]
    return (q_OI.astype(np.float32) * s).astype(dtype)


def unpack_int4(packed: np.ndarray, cols: int) -> np.ndarray:
    """int32 [O, ceil(cols/8)] → int8 [O, cols] signed values in [−8, 7]."""
    words = packed.astype(np.int32).view(np.uint32)
    shifts = (np.arange(8, dtype=np.uint32) * 4)
    nib = (words[:, :, None] >> shifts) & 0xF  # [O, W, 8]
    return (nib.reshape(words.shape[0], -1)[:, :cols].astype(np.int16) - 8).astype(np.int8)


def pack_int4(q_OI: np.ndarray) -> np.ndarray:
    """The inverse of `unpack_int4`: int values in [−8, 7], [O, I] → int32 [O, ceil(I/8)]."""
    o, i = q_OI.shape
    if q_OI.min(initial=0) < -8 or q_OI.max(initial=0) > 7:
        raise ValueError("int4 values must lie in [-8, 7]")
    u = np.zeros((o, -(-i // 8) * 8), np.uint32)
    u[:, :i] = (q_OI.astype(np.int32) + 8).astype(np.uint32)
    words = np.bitwise_or.reduce(u.reshape(o, -1, 8) << (np.arange(8, dtype=np.uint32) * 4), axis=-1)
    return words.astype(np.uint32).view(np.int32)


def dequant_int4_group(packed: np.ndarray, scale: np.ndarray, shape, group: int = INT4_GROUP,
                       dtype=np.float32) -> np.ndarray:
    """compressed-tensors pack-quantized symmetric int4 weight → dtype [O, I]."""
    o, i = (int(x) for x in np.asarray(shape).reshape(-1))
    if packed.shape != (o, -(-i // 8)):
        raise ValueError(f"weight_packed has shape {list(packed.shape)}; "
                         f"expected {[o, -(-i // 8)]} for weight_shape {[o, i]}")
    if scale.shape != (o, -(-i // group)):
        raise ValueError(f"weight_scale has shape {list(scale.shape)}; expected {[o, -(-i // group)]} "
                         f"(group size {group} along the input dim)")
    q = unpack_int4(packed, i).astype(np.float32)
    s = np.repeat(scale.astype(np.float32), group, axis=1)[:, :i]
    return (q * s).astype(dtype)


def is_float(dtype) -> bool:
    """True for the float dtypes a weight may be stored in (fp8 excluded: it always comes with a scale)."""
    return np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16),
                               np.dtype(np.float64))
