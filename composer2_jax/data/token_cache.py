"""Tokenize-once cache: each (source, tokenizer) pair tokenized once into ArrayRecord, read by later runs.

    <token_cache>/<tokenizer class>-<tokenizer digest[:12]>/<source label>-<key[:16]>/
        meta.json                                  format, key inputs (source and tokenizer fingerprints), counts
        ids-00000-of-0000N.array_record            one record per document, in the source's document order

A record is the document's ids and learn flags exactly as `pipeline.document_ids` made them (bos/eos included):
int32 header [n, k], then n little-endian int32 ids, then — only when k == -1 — n uint8 learn flags; k >= 0 means
the flags are k zeros then ones (a text document: 1 with bos, 0 without). Because the cached source has the same
length and order as the source, sharding, shuffling, mixing, packing and the iterator state are unchanged: batches
are identical with the cache cold, warm or off, and a state saved with the cache resumes without it and back.

The key hashes (format version, the source's fingerprint, the tokenizer's fingerprint, add_bos/add_eos, and for
chat sources the chat template's code). Source fingerprints come from the config without reading the documents
(file paths, sizes and mtimes; for directories the walked candidate files; for an in-process `provider`, its
`fingerprint()` or else a digest of every document); the tokenizer's from its `fingerprint()` method when it has
one, else its class, vocabulary size, special tokens, its tiktoken ranks and regex (when it wraps tiktoken) and the
ids of a probe text. A changed file, tokenizer or option gives a new key and so a new cache (old ones are never
deleted automatically: remove stale directories by hand).

Writes are atomic: a builder holds an exclusive flock on `<dir>.lock` (other processes wait on it, then read),
writes into `<dir>.partial-<host>-<pid>-<random>` and renames it into place after fsyncing meta.json, which is
written last, so a directory at the final path is always complete. On file systems where flock does not reach
across hosts the rename still lets exactly one writer win; the others discard their copy and read the winner's.
A builder that dies leaves its .partial directory behind; the next builder on that host removes it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import fcntl
import hashlib
import inspect
import json
import logging
import os
import re
import shutil
import socket
import time
import uuid
from typing import Any, Callable, Optional

import numpy as np

from composer2_jax.data import sources as sources_lib
from composer2_jax.data.sources import SourceConfig

log = logging.getLogger(__name__)

FORMAT = 1  # bump when the record layout or what `document_ids` emits changes
RECORDS_PER_SHARD = 100_000
META = "meta.json"
# Ids of this text are part of a tokenizer's fingerprint (pre-tokenizer, merges, byte fallback, non-ASCII).
PROBE = ("def probe(x):\n    return {'ünïcode': x ** 2, \"中文\": [1, 23, 456]}  # ✓ 🚀\n\t\r\n   \n"
         "The quick brown fox jumps over the lazy dog. It's 2026; we'll see.")
_CHAT_KINDS = ("chat_jsonl", "chat_parquet", "chat_hf_dataset", "source")


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------ fingerprints


def tokenizer_fingerprint(tokenizer) -> dict[str, Any]:
    """What identifies a tokenizer's output: its `fingerprint()` when it defines one, else class, vocabulary size,
    special tokens, tiktoken ranks and regex (if any) and the ids of a probe text."""
    fp: dict[str, Any] = {"class": f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}"}
    own = getattr(tokenizer, "fingerprint", None)
    if callable(own):
        fp["fingerprint"] = own()
        return fp
    fp["vocab_size"] = int(tokenizer.vocab_size)
    fp["special_tokens"] = sorted((str(k), int(v)) for k, v in dict(tokenizer.special_tokens).items())
    fp["bos_eos_pad"] = [int(tokenizer.bos_id), int(tokenizer.eos_id), int(tokenizer.pad_id)]
    enc = getattr(tokenizer, "_enc", None)  # a tiktoken.Encoding (TiktokenTokenizer)
    ranks = getattr(enc, "_mergeable_ranks", None)
    if ranks is not None:
        h = hashlib.sha256()
        for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            h.update(rank.to_bytes(4, "little") + len(tok).to_bytes(2, "little") + tok)
        fp["ranks_sha256"], fp["pat_str"] = h.hexdigest(), getattr(enc, "_pat_str", None)
    fp["probe_sha256"] = hashlib.sha256(np.asarray(tokenizer.encode_np(PROBE), "<i4").tobytes()).hexdigest()
    return fp


def source_fingerprint(spec: SourceConfig) -> dict[str, Any]:
    """What identifies a source's documents, from its config: files with sizes and mtimes (directories: the walked
    candidates), the fields that select what is read, or an in-process provider's fingerprint/content digest."""
    fp: dict[str, Any] = {"kind": spec.kind, "field": spec.field}
    if spec.kind in ("stdlib", "directory"):
        root = os.path.abspath(os.path.expanduser(spec.path or sources_lib.stdlib_root()))
        if not os.path.isdir(root):
            raise ValueError(f"directory source: {root!r} is not a directory")
        rel = sources_lib.walk_files(root, spec.pattern)
        fp.update(root=root, pattern=spec.pattern, files=sources_lib._file_stats(
            [os.path.join(root, r) for r in rel], relative_to=root))
    elif spec.kind in ("jsonl", "chat_jsonl", "array_record", "parquet", "chat_parquet"):
        fp.update(files=sources_lib._file_stats(sources_lib._expand(spec.path, spec.kind)),
                  record_format=spec.record_format)
    elif spec.kind in ("hf_dataset", "chat_hf_dataset"):
        fp.update(dataset=sources_lib.make_source(spec).fingerprint(), split=spec.split)
    elif spec.kind == "source":
        own = getattr(spec.provider, "fingerprint", None)
        fp["provider"] = own() if callable(own) else _content_digest(spec.provider)
    else:
        raise ValueError(f"source kind {spec.kind!r} cannot be cached; expected a random-access source kind")
    return fp


def _content_digest(src) -> dict[str, Any]:
    """A digest of every document's content (for providers without a fingerprint(): reads them all)."""
    h = hashlib.sha256()
    for i in range(len(src)):
        d = src[i]
        h.update(json.dumps({k: d[k] for k in ("text", "messages", "tools", "ids", "learn") if k in d},
                            sort_keys=True, ensure_ascii=False, default=lambda x: np.asarray(x).tolist()).encode())
        h.update(b"\n")
    return {"class": type(src).__name__, "docs": len(src), "sha256": h.hexdigest()}


def _chat_template_digest() -> str:
    from composer2_jax.data import chat as chat_lib

    return hashlib.sha256(inspect.getsource(chat_lib).encode()).hexdigest()


def cache_path(root: str, spec: SourceConfig, tokenizer, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the cache directory of `spec` tokenized by `tokenizer` with `options`, the inputs of its key)."""
    tok_fp = tokenizer_fingerprint(tokenizer)
    inputs = {"format": FORMAT, "source": source_fingerprint(spec), "tokenizer": tok_fp, "options": options}
    if spec.kind in _CHAT_KINDS:
        inputs["chat_template"] = _chat_template_digest()
    key = _digest(inputs)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.label).strip("_")[:60] or "source"
    tok_dir = f"{type(tokenizer).__name__.lower()}-{_digest(tok_fp)[:12]}"
    return os.path.join(os.path.abspath(os.path.expanduser(root)), tok_dir, f"{slug}-{key[:16]}"), inputs


# ------------------------------------------------------------------------------------------------ records


def encode_record(ids: np.ndarray, learn: np.ndarray) -> bytes:
    """One document's ids [n] and learn flags [n] -> a record (see the module docstring)."""
    ids, learn = np.asarray(ids), np.asarray(learn)
    n = len(ids)
    if len(learn) != n:
        raise ValueError(f"ids [{n}] and learn flags [{len(learn)}] differ in length")
    k = int(np.argmax(learn != 0)) if learn.any() else n
    simple = bool((learn[:k] == 0).all() and (learn[k:] == 1).all())
    header = np.asarray([n, k if simple else -1], "<i4").tobytes()
    body = ids.astype("<i4").tobytes()
    return header + body if simple else header + body + learn.astype(np.uint8).tobytes()


def decode_record(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A record -> (ids [n] int32, learn [n] int32), as `pipeline.document_ids` returned them."""
    n, k = np.frombuffer(raw, "<i4", 2)
    ids = np.frombuffer(raw, "<i4", n, 8).astype(np.int32)
    if k >= 0:
        learn = np.ones(n, np.int32)
        learn[:k] = 0
    else:
        learn = np.frombuffer(raw, np.uint8, n, 8 + 4 * n).astype(np.int32)
    return ids, learn


class TokenCacheSource:
    """A complete cache directory as a RandomAccessDataSource of {"ids", "learn"} documents."""

    def __init__(self, path: str, name: str = ""):
        import grain  # deferred: native extensions

        self.path, self.name = path, name or f"token_cache:{path}"
        try:
            with open(os.path.join(path, META)) as f:
                self.meta = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"token cache {path}: unreadable {META} ({e}); delete the directory to rebuild it") \
                from None
        if self.meta.get("format") != FORMAT:
            raise ValueError(f"token cache {path}: format {self.meta.get('format')!r}, expected {FORMAT}; delete "
                             f"the directory to rebuild it")
        files = [os.path.join(path, f) for f in self.meta["files"]]
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            raise ValueError(f"token cache {path}: files {missing[:3]} are missing; delete the directory to rebuild")
        self._src = grain.sources.ArrayRecordDataSource(files)
        if len(self._src) != self.meta["num_docs"]:
            raise ValueError(f"token cache {path}: {len(self._src)} records, meta.json says "
                             f"{self.meta['num_docs']}; delete the directory to rebuild it")

    def __len__(self) -> int:
        return len(self._src)

    def __getitem__(self, index: int) -> dict[str, Any]:
        ids, learn = decode_record(self._src[int(index)])
        return {"ids": ids, "learn": learn, "source": self.name, "index": int(index)}

    def __repr__(self) -> str:
        return f"TokenCacheSource(path={self.path!r}, docs={len(self)}, tokens={self.meta.get('num_tokens')})"


# ------------------------------------------------------------------------------------------------ build


@contextlib.contextmanager
def _exclusive(lock_path: str, what: str):
    """An exclusive flock on `lock_path` (waits, logging once, while another process holds it)."""
    fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            log.info("token cache: waiting for another process building %s", what)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _remove_dead_partials(final: str):
    """Delete .partial directories of `final` left by dead builders on this host."""
    parent, base, host = os.path.dirname(final), os.path.basename(final), socket.gethostname()
    for name in os.listdir(parent):
        m = re.fullmatch(re.escape(base) + r"\.partial-(.+)-(\d+)-[0-9a-f]+", name)
        if m and m.group(1) == host and not _alive(int(m.group(2))):
            log.warning("token cache: removing %s (left by dead process %s)", name, m.group(2))
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync(path: str):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(partial: str, src, encode: Callable[[dict], tuple[np.ndarray, np.ndarray]], threads: int,
           inputs: dict[str, Any], label: str) -> dict[str, Any]:
    """Tokenize every document of `src` into ArrayRecord shards under `partial`, meta.json last; the meta."""
    from array_record.python.array_record_module import ArrayRecordWriter

    t0, n = time.perf_counter(), len(src)
    num_shards = max(1, -(-n // RECORDS_PER_SHARD))
    files = [f"ids-{s:05d}-of-{num_shards:05d}.array_record" for s in range(num_shards)]

    def one(i: int) -> bytes:
        return encode_record(*encode(src[i]))

    tokens = 0
    pool = concurrent.futures.ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        for s, name in enumerate(files):
            writer = ArrayRecordWriter(os.path.join(partial, name), "group_size:1")
            rows = range(s * RECORDS_PER_SHARD, min(n, (s + 1) * RECORDS_PER_SHARD))
            for rec in (pool.map(one, rows, chunksize=64) if pool else map(one, rows)):
                writer.write(rec)
                tokens += int(np.frombuffer(rec, "<i4", 1)[0])
            writer.close()
            _fsync(os.path.join(partial, name))
    finally:
        if pool:
            pool.shutdown()
    meta = {"format": FORMAT, "label": label, "num_docs": n, "num_tokens": tokens, "files": files,
            "build_seconds": round(time.perf_counter() - t0, 3), "built_by": f"{socket.gethostname()}:{os.getpid()}",
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "key_inputs": inputs}
    meta_path = os.path.join(partial, META)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())
    return meta


def open_or_build(spec: SourceConfig, root: str, tokenizer, encode: Callable[[dict], tuple[np.ndarray, np.ndarray]],
                  options: dict[str, Any], *, threads: int = 1,
                  make_source: Optional[Callable[[SourceConfig], Any]] = None) -> tuple[TokenCacheSource, bool]:
    """(the cached token source of `spec`, whether this call built it). `encode(doc) -> (ids, learn)` tokenizes one
    document; it runs only when no complete cache exists. Concurrent callers: one builds, the others wait, then
    read (see the module docstring)."""
    final, inputs = cache_path(root, spec, tokenizer, options)
    if os.path.isdir(final):
        return TokenCacheSource(final, spec.label), False
    os.makedirs(os.path.dirname(final), exist_ok=True)
    with _exclusive(final + ".lock", final):
        if os.path.isdir(final):  # another process built it while this one waited
            return TokenCacheSource(final, spec.label), False
        _remove_dead_partials(final)
        src = (make_source or sources_lib.make_source)(spec)
        partial = f"{final}.partial-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.makedirs(partial)
        try:
            meta = _write(partial, src, encode, threads, inputs, spec.label)
            try:
                os.rename(partial, final)
            except OSError as e:  # another host won the race (flock not shared): read its copy
                if not os.path.isdir(final):
                    raise ValueError(f"token cache: cannot move {partial} to {final} ({e})") from None
                shutil.rmtree(partial, ignore_errors=True)
                return TokenCacheSource(final, spec.label), False
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    log.info("token cache: built %s (%d documents, %d tokens, %.1f s)", final, meta["num_docs"],
             meta["num_tokens"], meta["build_seconds"])
    return TokenCacheSource(final, spec.label), True
