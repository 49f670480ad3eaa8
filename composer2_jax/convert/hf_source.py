"""Reading an HF checkpoint directory leaf by leaf: name resolution, shape checks and dequantization.

`HFSource.plan(groups)` checks the whole checkpoint against the expected layout from the tensor headers alone
(no data read): every missing or misshaped tensor is an error naming it and the expected shape, and every tensor
nobody consumes is an error unless it is known to be irrelevant (rotary caches, the vision tower). Only then is
any data read, one leaf at a time.
"""

from __future__ import annotations

import logging
import re
from typing import Optional

import ml_dtypes
import numpy as np

from composer2_jax.convert import quant
from composer2_jax.convert.mapping import Group, Leaf
from composer2_jax.convert.safetensors_io import SafetensorsDir

log = logging.getLogger(__name__)

# Where the decoder and the LM head live, by checkpoint family (plain, K2.5 as released, K2.5 as transformers 5 saves).
DECODER_PREFIXES = ("model.", "language_model.model.", "model.language_model.")
HEAD_NAMES = ("lm_head", "language_model.lm_head")
# Tensors that carry no model weights we use (non-persistent RoPE caches saved by old code; the K2.5 vision side).
IGNORABLE = re.compile(r"(\.rotary_emb\.inv_freq$|^(model\.)?(vision_tower|mm_projector|multi_modal_projector)\.)")
DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(ml_dtypes.bfloat16): "bfloat16",
               np.dtype(np.float16): "float16"}
NP_DTYPES = {v: k for k, v in DTYPE_NAMES.items()}


class CheckpointError(ValueError):
    """The HF checkpoint does not match the expected layout."""


def _fmt(shape) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


class HFSource:
    """Dequantizing, shape-checking access to the tensors of an HF checkpoint directory."""

    def __init__(self, directory: str, quantization: Optional[dict] = None):
        self.st = SafetensorsDir(directory)
        self.fp8_block, self.int4_group = _quant_params(quantization)
        names = set(self.st.names())
        self.prefix = next((p for p in DECODER_PREFIXES if f"{p}embed_tokens.weight" in names), None)
        if self.prefix is None:
            raise CheckpointError(f"no embedding tensor found in {directory}; looked for "
                                  f"{[p + 'embed_tokens.weight' for p in DECODER_PREFIXES]}")
        self.head = next((h for h in HEAD_NAMES if self._linear_names(h)), HEAD_NAMES[0])
        self.fused: dict[str, bool] = {}

    # ------------------------------------------------------------------------------------------ name resolution

    def _linear_names(self, base: str) -> list[str]:
        """Stored tensor names of one Linear weight: plain, FP8 block-scaled, or int4 pack-quantized."""
        st = self.st
        if f"{base}.weight_packed" in st:
            return [f"{base}.weight_packed", f"{base}.weight_scale", f"{base}.weight_shape"]
        if f"{base}.weight" in st:
            if f"{base}.weight_scale_inv" in st:
                return [f"{base}.weight", f"{base}.weight_scale_inv"]
            return [f"{base}.weight"]
        return []

    def leaf_names(self, leaf: Leaf) -> list[str]:
        """The stored tensors a leaf reads (checking existence and shapes); raises CheckpointError."""
        if leaf.kind in ("vector", "embed"):
            self._expect(leaf.hf, leaf.shape)
            return [leaf.hf]
        if leaf.kind == "linear":
            return self._check_linear(leaf.hf, leaf.hf_shape)
        e = leaf.shape[0]
        fused = f"{leaf.hf}.gate_up_proj" in self.st
        self.fused[leaf.hf] = fused
        if fused:
            f_, d = (leaf.shape[1], leaf.shape[2]) if leaf.proj == "down_proj" else (leaf.shape[2], leaf.shape[1])
            if leaf.proj == "down_proj":
                self._expect(f"{leaf.hf}.down_proj", (e, d, f_))
                return [f"{leaf.hf}.down_proj"]
            self._expect(f"{leaf.hf}.gate_up_proj", (e, 2 * f_, d))
            return [f"{leaf.hf}.gate_up_proj"]
        return [n for j in range(e) for n in self._check_linear(leaf.expert_name(j)[: -len(".weight")], leaf.hf_shape)]

    def _expect(self, name: str, shape):
        if name not in self.st:
            raise CheckpointError(f"missing tensor {name!r} (expected shape {_fmt(shape)})")
        if tuple(self.st.shape(name)) != tuple(shape):
            raise CheckpointError(f"tensor {name!r} has shape {_fmt(self.st.shape(name))}; expected {_fmt(shape)}")

    def _check_linear(self, base: str, shape_OI) -> list[str]:
        names = self._linear_names(base)
        if not names:
            raise CheckpointError(f"missing tensor {base + '.weight'!r} (expected shape {_fmt(shape_OI)})")
        o, i = shape_OI
        if names[0].endswith("weight_packed"):
            g = self.int4_group
            self._expect(names[0], (o, -(-i // 8)))
            self._expect(names[1], (o, -(-i // g)))
            stored = [int(x) for x in np.asarray(self.st.get(names[2])).reshape(-1)]
            if stored != [o, i]:
                raise CheckpointError(f"tensor {names[2]!r} says {stored}; expected {[o, i]}")
        else:
            self._expect(names[0], shape_OI)
            if len(names) == 2:
                bo, bi = self.fp8_block
                self._expect(names[1], (-(-o // bo), -(-i // bi)))
        return names

    def plan(self, groups: list[Group], skip_prefixes: tuple[str, ...] = ()) -> dict[str, list[Leaf]]:
        """Check every group against the checkpoint; returns the optional leaves present per group."""
        used: set[str] = set()
        present: dict[str, list[Leaf]] = {}
        for g in groups:
            for leaf in g.leaves:
                used.update(self.leaf_names(leaf))
            present[g.name] = []
            for leaf in g.optional:
                if self._linear_names(leaf.hf) or leaf.hf in self.st:
                    used.update(self.leaf_names(leaf))
                    present[g.name].append(leaf)
        rest = sorted(set(self.st.names()) - used)
        skipped = [n for n in rest if IGNORABLE.search(n) or n.startswith(skip_prefixes)]
        if skipped:
            log.info("skipping %d tensors that carry no decoder weights (e.g. %s)", len(skipped), skipped[0])
        unknown = [n for n in rest if n not in set(skipped)]
        if unknown:
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            raise CheckpointError(f"unexpected tensor(s) in the checkpoint: {unknown[:10]}{more}")
        return present

    # ------------------------------------------------------------------------------------------------- reading

    def stored_dtype(self, leaf: Leaf) -> Optional[np.dtype]:
        """The float dtype a leaf is stored in, or None when it is quantized."""
        name = self.leaf_names(leaf)[0]
        dt = self.st.dtype(name)
        return dt if quant.is_float(dt) else None

    def linear_OI(self, base: str, shape_OI, dtype) -> np.ndarray:
        """One Linear weight [out, in], dequantized if needed, in dtype."""
        names = self._check_linear(base, shape_OI)
        if names[0].endswith("weight_packed"):
            return quant.dequant_int4_group(self.st.get(names[0]), self.st.get(names[1]), shape_OI,
                                            self.int4_group, dtype)
        if len(names) == 2:
            return quant.dequant_fp8_block(self.st.get(names[0]), self.st.get(names[1]), self.fp8_block, dtype)
        w = self.st.get(names[0])
        if not quant.is_float(w.dtype):
            raise CheckpointError(f"tensor {names[0]!r} is {w.dtype} without a scale tensor; expected a float weight")
        return np.asarray(w, dtype=dtype)

    def read(self, leaf: Leaf, dtype) -> np.ndarray:
        """A leaf's value in our layout and dtype (a fresh array, not a view of the file)."""
        if leaf.kind in ("vector", "embed"):
            return np.array(self.st.get(leaf.hf), dtype=dtype)
        if leaf.kind == "linear":
            w = self.linear_OI(leaf.hf, leaf.hf_shape, dtype)
            return np.ascontiguousarray(w.T).reshape(leaf.shape)
        if self.fused.get(leaf.hf, f"{leaf.hf}.gate_up_proj" in self.st):
            return self._read_fused(leaf, dtype)
        out = np.empty(leaf.shape, dtype)
        for j in range(leaf.shape[0]):
            out[j] = self.linear_OI(leaf.expert_name(j)[: -len(".weight")], leaf.hf_shape, dtype).T
        return out

    def _read_fused(self, leaf: Leaf, dtype) -> np.ndarray:
        if leaf.proj == "down_proj":  # [E, D, F] → [E, F, D]
            return np.ascontiguousarray(np.asarray(self.st.get(f"{leaf.hf}.down_proj"), dtype).transpose(0, 2, 1))
        f = leaf.shape[2]
        gu = self.st.get(f"{leaf.hf}.gate_up_proj")  # [E, 2F, D], gate rows first
        part = gu[:, :f] if leaf.proj == "gate_proj" else gu[:, f:]
        return np.ascontiguousarray(np.asarray(part, dtype).transpose(0, 2, 1))

    def same_tensor(self, a: str, b: str, chunk_bytes: int = 1 << 28) -> bool:
        """Whether two stored tensors are bit-identical (compared in chunks through the memory map)."""
        if a not in self.st or b not in self.st:
            return False
        if self.st.shape(a) != self.st.shape(b) or self.st.dtype(a) != self.st.dtype(b):
            return False
        x, y = self.st.get(a).reshape(-1).view(np.uint8), self.st.get(b).reshape(-1).view(np.uint8)
        return all(np.array_equal(x[k:k + chunk_bytes], y[k:k + chunk_bytes]) for k in range(0, x.size, chunk_bytes))


def _quant_params(q: Optional[dict]) -> tuple[tuple[int, int], int]:
    """(FP8 block, int4 group size) from a quantization_config; errors for methods we cannot dequantize."""
    block, group = quant.FP8_BLOCK, quant.INT4_GROUP
    if not q:
        return block, group
    method = q.get("quant_method")
    if method == "fp8":
        if q.get("fmt", "e4m3") != "e4m3":
            raise CheckpointError(f"quantization_config.fmt={q.get('fmt')!r}; only e4m3 FP8 weights are supported")
        return tuple(q.get("weight_block_size", block)), group
    if method == "compressed-tensors":
        for name, grp in (q.get("config_groups") or {}).items():
            w = grp.get("weights") or {}
            fmt = grp.get("format", q.get("format"))
            ok = (fmt == "pack-quantized" and w.get("num_bits") == 4 and w.get("type", "int") == "int"
                  and w.get("symmetric", True) and w.get("strategy", "group") == "group")
            if not ok:
                raise CheckpointError(f"quantization_config.config_groups.{name}: only symmetric int4 group "
                                      f"'pack-quantized' weights are supported, got format={fmt!r} weights={w}")
            group = int(w.get("group_size", group))
        return block, group
    raise CheckpointError(f"quantization_config.quant_method={method!r} is not supported; expected 'fp8' or "
                          f"'compressed-tensors'")
