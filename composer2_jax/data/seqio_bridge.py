"""seqio bridge: a seqio Task or Mixture (registered name or object) feeds the same tokenize -> pack pipeline.

The provider's tf.data dataset (this process's shard via `seqio.ShardInfo`, shuffled with the pipeline seed) is
iterated as numpy; one string feature ('text', else 'targets', or the one named) becomes the document text. Use a
string feature (e.g. `seqio.Feature(seqio.PassThroughVocabulary(0), dtype=tf.string, rank=0)`): the bridge
re-tokenizes with the pipeline's tokenizer, so token-id features are refused rather than mixed with another vocab.

The result is a grain IterDataset whose iterator state is the number of documents consumed; restoring re-opens the
(deterministic, seeded) tf.data pipeline and skips that many elements. TensorFlow and seqio are imported here only,
lazily, so the rest of the data package never pays for them.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import grain
import numpy as np

from composer2_jax.data.sources import SourceConfig


def resolve_provider(provider: Any):
    """A seqio Task/Mixture from a registered name or an object with `get_dataset`."""
    import seqio

    if isinstance(provider, str):
        try:
            return seqio.get_mixture_or_task(provider)
        except ValueError as e:
            raise ValueError(f"seqio source: no registered task or mixture named {provider!r} ({e})") from None
    if not hasattr(provider, "get_dataset"):
        raise ValueError(f"seqio source: expected a seqio Task/Mixture or a registered name, got {type(provider)!r}")
    return provider


def _to_text(value: Any, feature: str, where: str) -> str:
    """A numpy string/bytes feature value as str; ValueError for token ids or other types."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{where}: feature {feature!r} is not UTF-8") from None
    if isinstance(value, str):
        return value
    kind = getattr(value, "dtype", type(value).__name__)
    raise ValueError(f"{where}: feature {feature!r} holds {kind}, not text; the bridge re-tokenizes, so give the "
                     "task a string feature (seqio.PassThroughVocabulary, dtype=tf.string, rank=0)")


class ProcessShard(NamedTuple):
    """Which of the data-loading processes' disjoint shares this one reads (`seqio.ShardInfo`)."""

    index: int = 0  # this process, 0 ≤ index < count
    count: int = 1  # how many processes share the source


class SeqioDocuments(grain.IterDataset):
    """Documents {'text', 'source', 'index'} from one process's shard of a seqio Task/Mixture."""

    def __init__(self, provider: Any, *, split: str = "train", feature: Optional[str] = None, seed: int = 0,
                 shuffle: bool = True, num_epochs: Optional[int] = None, shard: ProcessShard = ProcessShard(),
                 name: str = ""):
        super().__init__()
        if not 0 <= shard.index < shard.count:
            raise ValueError(f"seqio source: process shard {shard.index} of {shard.count}; expected "
                             f"0 <= index < count")
        self.provider = resolve_provider(provider)
        self.split, self.feature, self.seed, self.shuffle = split, feature, seed, shuffle
        self.num_epochs, self.process_index, self.process_count = num_epochs, shard.index, shard.count
        self.name = name or f"seqio:{getattr(self.provider, 'name', self.provider)}"

    def tf_dataset(self):
        """This shard's tf.data.Dataset (untokenized features: sequence_length=None)."""
        import seqio

        shard = seqio.ShardInfo(self.process_index, self.process_count) if self.process_count > 1 else None
        return self.provider.get_dataset(sequence_length=None, split=self.split, shuffle=self.shuffle,
                                         seed=self.seed, shard_info=shard, num_epochs=self.num_epochs)

    def __iter__(self) -> "_SeqioIterator":
        return _SeqioIterator(self)

    def __str__(self) -> str:
        return f"SeqioDocuments({self.name}, split={self.split!r}, shard={self.process_index}/{self.process_count})"


class _SeqioIterator(grain.DatasetIterator):
    """Iterates the tf.data pipeline as numpy; state = documents consumed."""

    def __init__(self, ds: SeqioDocuments):
        super().__init__()
        self._ds = ds
        self._consumed = 0
        self._it = None

    def _open(self):
        """(Re)open the tf.data iterator positioned after `_consumed` elements."""
        self._it = self._ds.tf_dataset().skip(self._consumed).as_numpy_iterator()

    def _feature(self, example: dict) -> str:
        """The configured feature name, or 'text' / 'targets' when unset."""
        if self._ds.feature:
            if self._ds.feature not in example:
                raise ValueError(f"{self._ds.name}: feature {self._ds.feature!r} not in {sorted(example)}")
            return self._ds.feature
        for name in ("text", "targets"):
            if name in example:
                return name
        raise ValueError(f"{self._ds.name}: examples have neither 'text' nor 'targets' features: {sorted(example)}")

    def __next__(self) -> dict:
        if self._it is None:
            self._open()
        example = next(self._it)
        feature = self._feature(example)
        index = self._consumed
        text = _to_text(example[feature], feature, f"{self._ds.name} element {index}")
        self._consumed += 1
        return {"text": text, "source": self._ds.name, "index": index}

    def get_state(self) -> dict[str, Any]:
        return {"consumed": self._consumed}

    def set_state(self, state: dict[str, Any]):
        self._consumed = int(state["consumed"])
        self._it = None

    def __str__(self) -> str:
        return f"SeqioIterator({self._ds.name}, consumed={self._consumed})"


def seqio_documents(spec: SourceConfig, *, seed: int, shuffle: bool, num_epochs: Optional[int],
                    process_index: int, process_count: int) -> SeqioDocuments:
    """The document IterDataset of a `SourceConfig(kind="seqio")` (field "text" means: 'text', else 'targets')."""
    provider = spec.provider if spec.provider is not None else spec.path
    return SeqioDocuments(provider, split=spec.split, feature=None if spec.field == "text" else spec.field,
                          seed=seed, shuffle=shuffle, num_epochs=num_epochs,
                          shard=ProcessShard(process_index, process_count),
                          name=spec.label if spec.name or spec.path else "")
