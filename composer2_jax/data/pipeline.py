"""The training input pipeline on grain: shard -> shuffle -> mix -> tokenize -> pack -> batch, checkpointable.

    per source:  RandomAccessDataSource -> [process_index::process_count] -> shuffle(seed_i) -> repeat(num_epochs)
    mixture:     MapDataset.mix(weights)          (IterDataset.mix when a seqio source streams)
    tokenize:    document -> example {inputs, targets, loss_mask} [L]   (threads: grain ReadOptions)
    pack:        PackIterDataset -> rows {tokens, targets, loss_mask, segment_ids, positions} [T]
    batch:       .batch(batch_size // process_count) -> [B_local, T] int32, optional background-thread prefetch

Targets are formed per document *before* packing: a document's ids d[0..n] (bos, text, eos) give inputs d[:-1] and
targets d[1:], so every target is the next token of the same document and no target ever crosses a document
boundary (a document's final token is only ever a target; padding has target pad_id and loss_mask 0). Documents are
placed whole (first come, next row when they do not fit); a document longer than T is split into chunks that fill
rows (`long_documents="split"`, nothing dropped) or cut to T pairs (`"truncate"`). Each placed piece gets its own
segment id (1, 2, ... per row; 0 = padding) and positions 0, 1, ..., so attention with segment ids never crosses
documents or chunks.

Determinism: the stream is a pure function of (config, seed, process_index, process_count, source contents);
each epoch reshuffles (grain folds the epoch into the shuffle seed). Mixture weights are relative *document* rates,
interleaved deterministically by grain (exact proportions, not sampled).

Sources and mixtures: `cfg.sources`, or a JSON mixture file named by `cfg.mixture` (`cfg.components()`); the source
kinds (directories, JSONL, ArrayRecord, Parquet, HF save_to_disk, seqio) and the mixture format: docs/data.md.

Tokenize-once cache (`cfg.token_cache` = a directory): each random-access source is tokenized once per tokenizer
into ArrayRecord (data/token_cache.py) and read by later runs and other processes; the cached source keeps the
source's length and order, so batches and iterator states are the same with the cache off, cold or warm.
`warm_token_cache(cfg, tokenizer)` builds them ahead of a run (e.g. once, before a multi-host job starts).

Checkpointing: `it = iter(make_dataset(...))`; `it.get_state()` is a small JSON-serialisable dict and
`it.set_state(state)` on a fresh iterator resumes the exact stream. With orbax, save/restore it next to the train
state as `ocp.args.Composite(..., data=orbax_save_args(it))` / `data=orbax_restore_args(it)`: these are grain's
`grain.checkpoint.CheckpointSave/CheckpointRestore` for `grain.checkpoint.CheckpointHandler` (one JSON file per
process named process_{i}-of-{n}.json; grain takes i and n from jax.process_index/count).
"""

from __future__ import annotations

import atexit
import copy
import dataclasses
import json
import logging
import os
import weakref
from typing import Any, Optional, Sequence, Union

import grain
import numpy as np

from composer2_jax import schema
from composer2_jax.data import chat as chat_lib
from composer2_jax.data import sources as sources_lib
from composer2_jax.data.sources import SourceConfig
from composer2_jax.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)

BATCH_KEYS = ("tokens", "targets", "loss_mask", "segment_ids", "positions")
LONG_DOCUMENT_POLICIES = ("split", "truncate")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """What the pipeline reads and how it packs it."""

    # Mixture components (default: the stdlib corpus); left at the default when `mixture` names a file.
    sources: tuple[SourceConfig, ...] = (SourceConfig(),)
    # A JSON mixture file (list of source dicts; see docs/data.md) used instead of `sources`; "" = use `sources`.
    # Relative: to the working directory, else the repository root; paths inside are relative to the file.
    mixture: str = ""
    seq_len: int = 2048  # T: tokens per packed row
    batch_size: int = 8  # GLOBAL rows per step; each process yields batch_size // process_count
    seed: int = 0  # shuffle seed: same seed + config => same stream
    shuffle: bool = True  # shuffle each source's documents, with a new permutation every epoch
    num_epochs: Optional[int] = None  # passes over each source (None = forever); a finite mix stops with its first
    long_documents: str = "split"  # documents longer than seq_len: "split" into chunks | "truncate" to seq_len
    add_bos: bool = True  # prepend bos to every document (text and chat)
    add_eos: bool = True  # append eos to text documents (chats end with <|im_end|>)
    num_threads: int = 0  # reader/tokenizer threads (grain ReadOptions); 0 is fastest for bytes; raise for BPE/slow IO
    prefetch_buffer_size: int = 64  # tokenized documents read ahead
    prefetch_batches: int = 2  # batches built ahead in a background thread (0 = none); checkpoint-exact either way
    # Tokenize-once cache root (docs/data.md): each source's token ids are written once per tokenizer into
    # ArrayRecord there and read by later runs and other processes; same batches as without it. "" = off.
    token_cache: str = ""

    def __post_init__(self):
        _validate(self)

    def components(self) -> tuple[SourceConfig, ...]:
        """The mixture's sources: those of the `mixture` file when one is named, else `sources`."""
        return sources_lib.load_mixture(self.mixture) if self.mixture else self.sources


def _validate(c: DataConfig):
    """Reject inconsistent settings with a message naming the value."""
    if not isinstance(c.seq_len, int) or c.seq_len <= 1:
        raise ValueError(f"data.seq_len must be an int > 1 (inputs and next-token targets), got {c.seq_len!r}")
    if not isinstance(c.batch_size, int) or c.batch_size < 1:
        raise ValueError(f"data.batch_size must be a positive int, got {c.batch_size!r}")
    if not c.sources:
        raise ValueError("data.sources is empty; expected at least one SourceConfig")
    bad = [s for s in c.sources if not isinstance(s, SourceConfig)]
    if bad:
        raise ValueError(f"data.sources must hold SourceConfig objects, got {bad[:3]}")
    if c.mixture:
        sources_lib.load_mixture(c.mixture)  # fails now, naming the file, rather than at the first batch
        if c.sources != (SourceConfig(),):
            raise ValueError(f"data.mixture={c.mixture!r} and data.sources={[s.label for s in c.sources]} are both "
                             f"set; expected one of them (leave data.sources at its default with a mixture file)")
    if c.long_documents not in LONG_DOCUMENT_POLICIES:
        raise ValueError(f"data.long_documents={c.long_documents!r}; expected one of {LONG_DOCUMENT_POLICIES}")
    if c.num_epochs is not None and c.num_epochs < 1:
        raise ValueError(f"data.num_epochs must be None (forever) or >= 1, got {c.num_epochs}")
    if not isinstance(c.token_cache, str):
        raise ValueError(f"data.token_cache must be a directory path or '' (off), got {c.token_cache!r}")
    for name in ("num_threads", "prefetch_buffer_size", "prefetch_batches"):
        if getattr(c, name) < 0:
            raise ValueError(f"data.{name} must be >= 0, got {getattr(c, name)}")


def data_config(d: Any = None, **overrides) -> DataConfig:
    """The factory boundary: a data section (ConfigDict, dict or DataConfig; None = the defaults) with field
    overrides → a frozen, validated DataConfig; unknown keys are ConfigErrors naming the key."""
    merged = schema.to_dict(schema.from_config_dict(DataConfig, d if d is not None else {}, "data"))
    merged.update(overrides)
    return schema.from_config_dict(DataConfig, merged, "data")


# ----------------------------------------------------------------------------------------------- documents


def _derive_seed(seed: int, index: int) -> int:
    """A 32-bit seed for source `index`, independent across sources."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def _check_process(batch_size: int, process_index: int, process_count: int):
    """ValueError unless 0 <= process_index < process_count and process_count divides batch_size."""
    if process_count < 1 or not 0 <= process_index < process_count:
        raise ValueError(f"process_index={process_index} must lie in [0, process_count={process_count})")
    if batch_size % process_count:
        raise ValueError(f"data.batch_size={batch_size} is not divisible by process_count={process_count}")


def _map_source_documents(spec: SourceConfig, src, seed: int, cfg: DataConfig, process_index: int,
                          process_count: int) -> grain.MapDataset:
    """One random-access source: this process's shard, shuffled per epoch, repeated."""
    if len(src) < process_count:
        raise ValueError(f"source {spec.label!r} has {len(src)} documents, fewer than process_count={process_count}")
    ds = grain.MapDataset.source(src)[process_index::process_count]
    if cfg.shuffle:
        ds = ds.shuffle(seed=seed)
    return ds.repeat(cfg.num_epochs)


def make_documents(cfg: DataConfig, process_index: int = 0, process_count: int = 1, *,
                   tokenizer: Optional[Tokenizer] = None):
    """This process's mixed document stream: a grain MapDataset, or an IterDataset when a seqio source streams.

    With `cfg.token_cache` and a `tokenizer`, each random-access source is replaced by its tokenize-once cache
    (built here on first use): documents are then {"ids", "learn"}, in the same order, so the stream is unchanged.
    """
    _check_process(cfg.batch_size, process_index, process_count)
    parts, specs = [], cfg.components()
    for i, spec in enumerate(specs):
        seed = _derive_seed(cfg.seed, i)
        if spec.kind == "seqio":
            from composer2_jax.data import seqio_bridge  # deferred: imports tensorflow

            if cfg.token_cache:
                log.info("token cache: seqio source %s streams and is tokenized every run", spec.label)
            parts.append(seqio_bridge.seqio_documents(spec, seed=seed, shuffle=cfg.shuffle, num_epochs=cfg.num_epochs,
                                                      process_index=process_index, process_count=process_count))
        else:
            src = (_cached_source(spec, tokenizer, cfg) if cfg.token_cache and tokenizer is not None
                   else sources_lib.make_source(spec))
            parts.append(_map_source_documents(spec, src, seed, cfg, process_index, process_count))
    weights = [s.weight for s in specs]
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, grain.MapDataset) for p in parts):
        return grain.MapDataset.mix(parts, weights)
    parts = [p.to_iter_dataset(_read_options(cfg)) if isinstance(p, grain.MapDataset) else p for p in parts]
    return grain.IterDataset.mix(parts, weights)


def _cached_source(spec: SourceConfig, tokenizer: Tokenizer, cfg: DataConfig):
    """The tokenize-once cache of one source (built now when missing; concurrent processes build it once)."""
    from composer2_jax.data import token_cache  # deferred: only runs with a cache import it

    src, _ = token_cache.open_or_build(spec, cfg.token_cache, tokenizer, _DocumentIds(tokenizer, cfg),
                                       {"add_bos": cfg.add_bos, "add_eos": cfg.add_eos},
                                       threads=max(1, cfg.num_threads))
    return src


def warm_token_cache(cfg: DataConfig, tokenizer: Tokenizer) -> list[str]:
    """Build (or find) the token cache of every random-access source of the mixture; their directories."""
    if not cfg.token_cache:
        raise ValueError("data.token_cache is '' (off); expected the cache directory to warm")
    return [_cached_source(spec, tokenizer, cfg).path for spec in cfg.components() if spec.kind != "seqio"]


def _read_options(cfg: DataConfig) -> grain.ReadOptions:
    """grain read options from the config."""
    return grain.ReadOptions(num_threads=cfg.num_threads, prefetch_buffer_size=cfg.prefetch_buffer_size)


# ------------------------------------------------------------------------------------------------ examples


def document_ids(doc: dict, tokenizer: Tokenizer, cfg: DataConfig) -> tuple[np.ndarray, np.ndarray]:
    """A document's ids [n] and per-id learn flags [n]: bos + text + eos (all learned), or a rendered chat; a
    pre-tokenized document ({"ids", "learn"}: the token cache) is passed through as it is."""
    if "ids" in doc:
        return np.asarray(doc["ids"], np.int32), np.asarray(doc["learn"], np.int32)
    if "messages" in doc:
        r = chat_lib.render_chat(doc["messages"], tokenizer, tools=doc.get("tools"))
        ids, learn = np.asarray(r.ids, np.int32), np.asarray(r.loss_mask, np.int32)
        eos = np.zeros(0, np.int32)
    elif "text" in doc:
        ids = tokenizer.encode_np(doc["text"])
        learn = np.ones_like(ids)
        eos = np.asarray([tokenizer.eos_id] if cfg.add_eos else [], np.int32)
        ids, learn = np.concatenate([ids, eos]), np.concatenate([learn, np.ones_like(eos)])
    else:
        raise ValueError(f"document from {doc.get('source', '?')} has neither 'text' nor 'messages': {sorted(doc)}")
    # a format that renders its own BOS (DeepSeek-V3) gets no second one
    if cfg.add_bos and not ("messages" in doc and chat_lib.get_chat_format(tokenizer).opens_with_bos):
        ids, learn = np.concatenate([[tokenizer.bos_id], ids]), np.concatenate([[0], learn])
    return ids.astype(np.int32), learn.astype(np.int32)


def document_to_example(doc: dict, tokenizer: Tokenizer, cfg: DataConfig) -> Optional[dict[str, np.ndarray]]:
    """Document -> {inputs, targets, loss_mask} [L] (targets = next id of the same document); None if empty."""
    ids, learn = document_ids(doc, tokenizer, cfg)  # [n], [n]
    if cfg.long_documents == "truncate":
        ids, learn = ids[:cfg.seq_len + 1], learn[:cfg.seq_len + 1]
    if len(ids) < 2 or not learn[1:].any():
        return None
    return {"inputs": ids[:-1], "targets": ids[1:], "loss_mask": learn[1:]}  # each [n - 1]


class _DocumentIds:
    """Picklable document -> (ids, learn) with fixed tokenizer and config (what the token cache stores)."""

    def __init__(self, tokenizer: Tokenizer, cfg: DataConfig):
        self.tokenizer, self.cfg = tokenizer, cfg

    def __call__(self, doc: dict) -> tuple[np.ndarray, np.ndarray]:
        return document_ids(doc, self.tokenizer, self.cfg)


class _Tokenize:
    """Picklable document -> example map (a grain map transform)."""

    def __init__(self, tokenizer: Tokenizer, cfg: DataConfig):
        self.tokenizer, self.cfg = tokenizer, cfg

    def __call__(self, doc: dict) -> Optional[dict[str, np.ndarray]]:
        return document_to_example(doc, self.tokenizer, self.cfg)


def make_examples(cfg: DataConfig, tokenizer: Tokenizer, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """This process's stream of tokenized examples (empty documents dropped)."""
    docs = make_documents(cfg, process_index, process_count, tokenizer=tokenizer)
    tokenize = _Tokenize(tokenizer, cfg)
    if isinstance(docs, grain.MapDataset):
        return docs.map(tokenize).to_iter_dataset(_read_options(cfg))  # drops the Nones
    return docs.map(tokenize).filter(lambda ex: ex is not None)


# ------------------------------------------------------------------------------------------------- packing


class PackIterDataset(grain.IterDataset):
    """Packs examples {inputs, targets, loss_mask} [L] into rows of BATCH_KEYS, each [T]."""

    def __init__(self, parent: grain.IterDataset, seq_len: int, pad_id: int):
        super().__init__(parent)
        if seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        self._seq_len, self._pad_id = seq_len, pad_id

    def __iter__(self) -> "_PackIterator":
        return _PackIterator(self._parent.__iter__(), self._seq_len, self._pad_id)

    def __str__(self) -> str:
        return f"PackIterDataset(seq_len={self._seq_len})"


class _PackIterator(grain.DatasetIterator):
    """Next-fit packing; state = (parent state before the unfinished example, tokens of it already emitted)."""

    def __init__(self, parent: grain.DatasetIterator, seq_len: int, pad_id: int):
        super().__init__(parent)
        self._seq_len, self._pad_id = seq_len, pad_id
        self._pending: Optional[dict[str, np.ndarray]] = None  # example not yet fully emitted
        self._pending_state: Any = None  # parent state just before `_pending` was read
        self._offset = 0  # tokens of `_pending` already emitted

    def _fetch(self) -> bool:
        """Read the next example into `_pending`; False when the parent is exhausted."""
        state = copy.deepcopy(self._parent.get_state())
        try:
            ex = next(self._parent)
        except StopIteration:
            return False
        self._pending, self._pending_state, self._offset = ex, state, 0
        return True

    def __next__(self) -> dict[str, np.ndarray]:
        T = self._seq_len
        row = {k: np.zeros(T, np.int32) for k in BATCH_KEYS}  # each [T]
        row["tokens"][:] = self._pad_id
        row["targets"][:] = self._pad_id
        fill, segment = 0, 0
        while fill < T:
            if self._pending is None and not self._fetch():
                break
            n = len(self._pending["inputs"]) - self._offset
            if fill + n > T and n <= T:  # fits a fresh row whole: do not split it
                break
            take = min(n, T - fill)
            segment += 1
            src = slice(self._offset, self._offset + take)
            dst = slice(fill, fill + take)
            row["tokens"][dst] = self._pending["inputs"][src]
            row["targets"][dst] = self._pending["targets"][src]
            row["loss_mask"][dst] = self._pending["loss_mask"][src]
            row["segment_ids"][dst] = segment
            row["positions"][dst] = np.arange(take, dtype=np.int32)
            fill += take
            self._offset += take
            if self._offset == len(self._pending["inputs"]):
                self._pending = None
        if fill == 0:
            raise StopIteration
        return row

    def get_state(self) -> dict[str, Any]:
        if self._pending is None:
            return {"parent": copy.deepcopy(self._parent.get_state()), "offset": 0}
        return {"parent": copy.deepcopy(self._pending_state), "offset": self._offset}

    def set_state(self, state: dict[str, Any]):
        self._parent.set_state(state["parent"])
        self._pending, self._pending_state, self._offset = None, None, 0
        if state["offset"]:
            if not self._fetch():
                raise ValueError(f"pack state {state} points past the end of its input")
            self._offset = int(state["offset"])

    def __str__(self) -> str:
        return f"PackIterator(seq_len={self._seq_len})"


# --------------------------------------------------------------------------------------------------- batches


def make_dataset(cfg: DataConfig, tokenizer: Tokenizer, process_index: int = 0,
                 process_count: int = 1) -> grain.IterDataset:
    """This process's batches {tokens, targets, loss_mask, segment_ids, positions}, each [B_local, T] int32."""
    _check_process(cfg.batch_size, process_index, process_count)
    examples = make_examples(cfg, tokenizer, process_index, process_count)
    ds = PackIterDataset(examples, cfg.seq_len, tokenizer.pad_id)
    ds = ds.batch(cfg.batch_size // process_count, drop_remainder=True)
    if cfg.prefetch_batches:
        ds = _ClosedAtExit(grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=cfg.prefetch_batches))
    return ds


_LIVE_ITERATORS: "weakref.WeakSet[grain.DatasetIterator]" = weakref.WeakSet()


@atexit.register
def _close_live_iterators():
    """Stop background prefetch threads before interpreter teardown (grain's __del__ fails once modules are gone)."""
    for it in list(_LIVE_ITERATORS):
        it.close()
        it.close = lambda: None  # its __del__ calls close() again after teardown has cleared grain's module globals


class _ClosedAtExit(grain.IterDataset):
    """Identity dataset whose iterators are closed at interpreter exit."""

    def __iter__(self) -> grain.DatasetIterator:
        it = self._parent.__iter__()
        _LIVE_ITERATORS.add(it)
        return it


def make_iterator(cfg: DataConfig, tokenizer: Tokenizer, process_index: int = 0, process_count: int = 1,
                  state: Optional[dict] = None) -> grain.DatasetIterator:
    """A batch iterator, resumed from `state` (a previous `get_state()`) when given (None or {} = from the start)."""
    it = iter(make_dataset(cfg, tokenizer, process_index, process_count))
    if state:
        it.set_state(state)
    return it


def save_state(it: grain.DatasetIterator, path: Union[str, os.PathLike]) -> None:
    """Write the iterator state as JSON (for trainers that do not use orbax)."""
    with open(path, "w") as f:
        json.dump(it.get_state(), f)


def load_state(it: grain.DatasetIterator, path: Union[str, os.PathLike]) -> grain.DatasetIterator:
    """Restore the iterator from a JSON state file written by `save_state`."""
    with open(path) as f:
        it.set_state(json.load(f))
    return it


def orbax_save_args(it: grain.DatasetIterator):
    """The orbax save arg for the data iterator (grain.checkpoint.CheckpointSave -> grain's CheckpointHandler)."""
    return grain.checkpoint.CheckpointSave(it)


def orbax_restore_args(it: grain.DatasetIterator):
    """The orbax restore arg: restores the state into `it` in place (grain.checkpoint.CheckpointRestore)."""
    return grain.checkpoint.CheckpointRestore(it)


def describe_batch(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    """Shapes and fill statistics of one batch (for logs)."""
    tokens = int((batch["segment_ids"] > 0).sum())
    return {"shape": list(batch["tokens"].shape), "tokens": tokens, "learned": int(batch["loss_mask"].sum()),
            "fill": tokens / batch["tokens"].size, "segments": int(batch["segment_ids"].max(axis=-1).sum())}


__all__: Sequence[str] = (
    "BATCH_KEYS", "DataConfig", "SourceConfig", "data_config", "make_documents", "warm_token_cache",
    "make_examples", "make_dataset", "make_iterator", "document_to_example", "PackIterDataset", "save_state",
    "load_state", "orbax_save_args", "orbax_restore_args", "describe_batch",
)
