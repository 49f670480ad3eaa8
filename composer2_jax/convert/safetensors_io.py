"""Minimal lazy safetensors reader and streaming writer (numpy + ml_dtypes, so bf16 and fp8 need no torch).

Format (https://github.com/huggingface/safetensors): 8-byte little-endian header length N, an N-byte JSON header
{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the raw little-endian bytes.
The reader memory-maps each file, so reading one tensor touches only that tensor's bytes; the writer is told the
whole layout of a file up front and then takes the tensors one at a time, so it never buffers a shard.
"""

from __future__ import annotations

import json
import math
import os
import struct
from typing import Optional, Sequence

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64), "F32": np.dtype(np.float32), "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16), "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2), "I64": np.dtype(np.int64), "I32": np.dtype(np.int32),
    "I16": np.dtype(np.int16), "I8": np.dtype(np.int8), "U8": np.dtype(np.uint8), "BOOL": np.dtype(np.bool_),
}
DTYPE_NAMES: dict[np.dtype, str] = {v: k for k, v in DTYPES.items()}
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


def dtype_name(dtype) -> str:
    """safetensors dtype string of a numpy dtype."""
    d = np.dtype(dtype)
    if d not in DTYPE_NAMES:
        raise ValueError(f"dtype {d} has no safetensors encoding; expected one of {sorted(map(str, DTYPE_NAMES))}")
    return DTYPE_NAMES[d]


class TensorInfo:
    """Where one tensor lives: file, dtype, shape, byte range (absolute in the file)."""

    __slots__ = ("file", "dtype", "shape", "start", "end")

    def __init__(self, file: str, dtype: np.dtype, shape: tuple[int, ...], start: int, end: int):
        self.file, self.dtype, self.shape, self.start, self.end = file, dtype, shape, start, end


def read_header(path: str) -> tuple[dict, int]:
    """(JSON header, byte offset of the data section) of one safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return header, 8 + n


class SafetensorsDir:
    """All tensors of an HF checkpoint directory (sharded with an index, one model.safetensors, or any
    *.safetensors)."""

    def __init__(self, directory: str):
        self.directory = directory
        self.info: dict[str, TensorInfo] = {}
        self._maps: dict[str, np.memmap] = {}
        for fname in self._files():
            path = os.path.join(directory, fname)
            header, base = read_header(path)
            for name, h in header.items():
                if name == "__metadata__":
                    continue
                if h["dtype"] not in DTYPES:
                    raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {h['dtype']}")
                b, e = h["data_offsets"]
                self.info[name] = TensorInfo(path, DTYPES[h["dtype"]], tuple(h["shape"]), base + b, base + e)

    def _files(self) -> list[str]:
        index = os.path.join(self.directory, INDEX_FILE)
        if os.path.exists(index):
            with open(index) as f:
                return sorted(set(json.load(f)["weight_map"].values()))
        if os.path.exists(os.path.join(self.directory, SINGLE_FILE)):
            return [SINGLE_FILE]
        files = sorted(f for f in os.listdir(self.directory) if f.endswith(".safetensors"))
        if not files:
            raise FileNotFoundError(f"no {INDEX_FILE}, {SINGLE_FILE} or *.safetensors in {self.directory}")
        return files

    def __contains__(self, name: str) -> bool:
        return name in self.info

    def names(self) -> list[str]:
        return sorted(self.info)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.info[name].shape

    def dtype(self, name: str) -> np.dtype:
        return self.info[name].dtype

    def get(self, name: str) -> np.ndarray:
        """A read-only view of the tensor's bytes in the memory map (copy it to keep it)."""
        t = self.info[name]
        if t.file not in self._maps:
            self._maps[t.file] = np.memmap(t.file, dtype=np.uint8, mode="r")
        raw = self._maps[t.file][t.start:t.end]
        n = math.prod(t.shape)
        return raw.view(t.dtype)[:n].reshape(t.shape) if n else np.zeros(t.shape, t.dtype)


def plan_shards(entries: Sequence[tuple[str, tuple[int, ...], np.dtype]], max_shard_bytes: int) -> list[list[int]]:
    """Split tensors (in order) into consecutive shards of at most max_shard_bytes (a bigger tensor gets its own)."""
    shards, cur, size = [], [], 0
    for i, (_, shape, dtype) in enumerate(entries):
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if cur and size + nbytes > max_shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += nbytes
    if cur:
        shards.append(cur)
    return shards


def _encode_header(entries, metadata: Optional[dict]) -> bytes:
    header, off = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, shape, dtype in entries:
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        header[name] = {"dtype": dtype_name(dtype), "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data section starts 8-byte aligned
    return struct.pack("<Q", len(raw)) + raw


class ShardedWriter:
    """Writes a known, ordered list of tensors into HF-named shards, taking the data one tensor at a time.

    `put(name, array)` must follow the order of `entries`. One file is open at a time; nothing is buffered.
    A single shard is written as model.safetensors (no index), as transformers does.
    """

    def __init__(self, directory: str, entries: Sequence[tuple[str, tuple[int, ...], np.dtype]],
                 max_shard_bytes: int, metadata: Optional[dict] = None):
        self.directory, self.entries = directory, list(entries)
        self.metadata = {"format": "pt"} if metadata is None else metadata
        self.shards = plan_shards(self.entries, max_shard_bytes)
        n = len(self.shards)
        self.files = [SINGLE_FILE] if n == 1 else [f"model-{k + 1:05d}-of-{n:05d}.safetensors" for k in range(n)]
        self.shard_of = {i: k for k, idx in enumerate(self.shards) for i in idx}
        self._next, self._file, self._open_shard = 0, None, -1
        os.makedirs(directory, exist_ok=True)

    def put(self, name: str, array: np.ndarray):
        i = self._next
        if i >= len(self.entries) or self.entries[i][0] != name:
            expected = self.entries[i][0] if i < len(self.entries) else "<end>"
            raise ValueError(f"tensor {name!r} written out of order; expected {expected!r}")
        _, shape, dtype = self.entries[i]
        if tuple(array.shape) != tuple(shape) or np.dtype(array.dtype) != np.dtype(dtype):
            raise ValueError(f"tensor {name!r}: got {array.dtype}{list(array.shape)}, "
                             f"planned {np.dtype(dtype)}{list(shape)}")
        k = self.shard_of[i]
        if k != self._open_shard:
            self._close()
            self._file = open(os.path.join(self.directory, self.files[k]), "wb")
            self._file.write(_encode_header([self.entries[j] for j in self.shards[k]], self.metadata))
            self._open_shard = k
        self._file.write(np.ascontiguousarray(array).tobytes())
        self._next += 1

    def _close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def finish(self):
        """Close the last shard and write model.safetensors.index.json when there is more than one."""
        if self._next != len(self.entries):
            raise ValueError(f"only {self._next} of {len(self.entries)} planned tensors were written; "
                             f"next missing: {self.entries[self._next][0]!r}")
        self._close()
        if len(self.files) > 1:
            total = sum(math.prod(s) * np.dtype(d).itemsize for _, s, d in self.entries)
            index = {"metadata": {"total_size": total},
                     "weight_map": {name: self.files[self.shard_of[i]] for i, (name, _, _) in enumerate(self.entries)}}
            with open(os.path.join(self.directory, INDEX_FILE), "w") as f:
                json.dump(index, f, indent=2, sort_keys=True)


def save_file(tensors: dict[str, np.ndarray], path: str, metadata: Optional[dict] = None):
    """Write a dict of arrays to one safetensors file (small files: tests, synthetic checkpoints)."""
    entries = [(k, tuple(v.shape), v.dtype) for k, v in tensors.items()]
    with open(path, "wb") as f:
        f.write(_encode_header(entries, {"format": "pt"} if metadata is None else metadata))
        for v in tensors.values():
            f.write(np.ascontiguousarray(v).tobytes())

