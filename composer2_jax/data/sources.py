"""Document sources: grain RandomAccessDataSources (`len` + `getitem`) of documents.

A document is a dict: `{"text": str, ...metadata}` for pre-training text, or `{"messages": [...], "tools": ...}` for
SFT conversations (see data/chat.py). Metadata ('source', 'path', 'line', 'index') is carried along for debugging
and dropped at tokenization.

Sources (constructed directly or through `SourceConfig` + `make_source`):
- `DirectorySource(root, pattern)`: files under a local directory in sorted path order; unreadable, binary (NUL
  byte), non-UTF-8 and empty files are skipped and counted in `.skipped`. `stdlib_source()` is the embedded default
  corpus: the Python standard library source of this machine (`sysconfig.get_paths()['stdlib']`, *.py, without
  site-packages), so nothing is downloaded.
- `JsonlSource(pattern, field)`: one JSON object per line; a text field by name, or (`chat=True`) a list of messages.
- `ArrayRecordSource(pattern, record_format)`: ArrayRecord files whose records are UTF-8 text or JSON objects.
- `InMemorySource(items)`: texts or document dicts held in memory (tests, notebooks; `SourceConfig(kind="source",
  provider=...)` mixes it, or any other RandomAccessDataSource of documents, into a pipeline).
A source that resolves to zero documents raises a ValueError at construction naming the path or pattern.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import json
import logging
import os
import sysconfig
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

log = logging.getLogger(__name__)

Document = dict[str, Any]
# Directories never entered by DirectorySource (installed third-party packages, caches, VCS metadata).
DEFAULT_EXCLUDE_DIRS = ("site-packages", "dist-packages", "__pycache__", ".git", ".hg", ".svn", "node_modules")


def _expand(pattern: Union[str, Sequence[str]], what: str) -> list[str]:
    """Sorted files matching a path, glob or comma-separated list of them; ValueError when nothing matches."""
    patterns = pattern.split(",") if isinstance(pattern, str) else list(pattern)
    files = sorted({f for p in patterns if p.strip() for f in glob.glob(os.path.expanduser(p.strip()))
                    if os.path.isfile(f)})
    if not files:
        raise ValueError(f"{what} source: no files match {pattern!r}")
    return files


def _read_text(path: str) -> tuple[Optional[str], str]:
    """(text, "") for a readable non-empty UTF-8 text file, else (None, reason)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None, "unreadable"
    if b"\x00" in raw:
        return None, "binary"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "non_utf8"
    if not text.strip():
        return None, "empty"
    return text, ""


class DirectorySource:
    """Text files under `root` whose names match `pattern`, in sorted relative-path order."""

    def __init__(self, root: str, pattern: str = "*.py", *, exclude_dirs: Sequence[str] = DEFAULT_EXCLUDE_DIRS,
                 name: str = ""):
        self.root = os.path.abspath(os.path.expanduser(root))
        self.name = name or f"dir:{self.root}"
        if not os.path.isdir(self.root):
            raise ValueError(f"directory source: {self.root!r} is not a directory")
        self.skipped: dict[str, int] = {}
        self._paths: list[str] = []
        for rel in self._walk(pattern, set(exclude_dirs)):
            _, reason = _read_text(os.path.join(self.root, rel))
            if reason:
                self.skipped[reason] = self.skipped.get(reason, 0) + 1
            else:
                self._paths.append(rel)
        if not self._paths:
            raise ValueError(f"directory source: no readable UTF-8 files match {pattern!r} under {self.root!r} "
                             f"(skipped: {self.skipped or 'none found'})")
        if self.skipped:
            log.info("%s: %d files, skipped %s", self.name, len(self._paths), self.skipped)

    def _walk(self, pattern: str, exclude: set[str]) -> list[str]:
        """Relative paths of matching files, sorted, without entering excluded or hidden directories."""
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d not in exclude and not d.startswith(".")]
            rel_dir = os.path.relpath(dirpath, self.root)
            out += [os.path.normpath(os.path.join(rel_dir, f)) for f in filenames if fnmatch.fnmatch(f, pattern)]
        return sorted(out)

    @property
    def num_skipped(self) -> int:
        """Files that matched the pattern but were unreadable, binary, non-UTF-8 or empty."""
        return sum(self.skipped.values())

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, index: int) -> Document:
        rel = self._paths[index]
        text, reason = _read_text(os.path.join(self.root, rel))
        if text is None:
            raise ValueError(f"{self.name}: {rel!r} became {reason} after the start-up scan")
        return {"text": text, "path": rel, "source": self.name, "index": int(index)}

    def __repr__(self) -> str:
        return f"DirectorySource(root={self.root!r}, files={len(self)}, skipped={self.skipped})"


def stdlib_root() -> str:
    """The Python standard library source directory of this interpreter."""
    return sysconfig.get_paths()["stdlib"]


def stdlib_source(name: str = "stdlib") -> DirectorySource:
    """The embedded default corpus: the standard library's *.py files (site-packages excluded)."""
    return DirectorySource(stdlib_root(), "*.py", name=name)


class JsonlSource:
    """JSON Lines files; each non-blank line is one document (a text field, or a list of chat messages)."""

    def __init__(self, pattern: Union[str, Sequence[str]], field: str = "text", *, chat: bool = False,
                 name: str = ""):
        self.files = _expand(pattern, "jsonl")
        self.field, self.chat = field, chat
        self.name = name or f"jsonl:{pattern}"
        file_idx, offsets = [], []
        for i, path in enumerate(self.files):
            offs = _line_offsets(path)
            file_idx.append(np.full(len(offs), i, np.int32))
            offsets.append(offs)
        self._file = np.concatenate(file_idx)  # [N] file index of each document
        self._offset = np.concatenate(offsets)  # [N] byte offset of each document's line
        if len(self._offset) == 0:
            raise ValueError(f"jsonl source: files matching {pattern!r} hold no records ({self.files})")

    def __len__(self) -> int:
        return len(self._offset)

    def __getitem__(self, index: int) -> Document:
        path = self.files[int(self._file[index])]
        with open(path, "rb") as f:
            f.seek(int(self._offset[index]))
            line = f.readline()
        where = f"{path} @byte {int(self._offset[index])}"
        try:
            record = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{where}: invalid JSON ({e})") from None
        doc = _record_to_document(record, self.field, self.chat, where)
        doc.update(path=path, source=self.name, index=int(index))
        return doc

    def __repr__(self) -> str:
        return f"JsonlSource(files={len(self.files)}, records={len(self)}, field={self.field!r}, chat={self.chat})"


def _line_offsets(path: str) -> np.ndarray:
    """Byte offsets [n] of the non-blank lines of a file."""
    offs, pos = [], 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                offs.append(pos)
            pos += len(line)
    return np.asarray(offs, np.int64)


def _record_to_document(record: Any, field: str, chat: bool, where: str) -> Document:
    """A parsed JSON record -> document; ValueError naming `where` when the field is missing or mistyped."""
    if not isinstance(record, Mapping) or field not in record:
        keys = sorted(record) if isinstance(record, Mapping) else type(record).__name__
        raise ValueError(f"{where}: expected an object with field {field!r}, got {keys}")
    value = record[field]
    if chat:
        if not isinstance(value, list):
            raise ValueError(f"{where}: chat field {field!r} must be a list of messages, got {type(value).__name__}")
        doc = {"messages": value}
        if record.get("tools") is not None:
            doc["tools"] = record["tools"]
        return doc
    if not isinstance(value, str):
        raise ValueError(f"{where}: text field {field!r} must be a string, got {type(value).__name__}")
    return {"text": value}


class ArrayRecordSource:
    """ArrayRecord files (grain.sources.ArrayRecordDataSource) whose records are UTF-8 text or JSON objects."""

    def __init__(self, pattern: Union[str, Sequence[str]], record_format: str = "text", field: str = "text", *,
                 chat: bool = False, name: str = ""):
        import grain  # deferred: importing grain pulls in its native extensions

        if record_format not in ("text", "json"):
            raise ValueError(f"array_record record_format={record_format!r}; expected 'text' or 'json'")
        self.files = _expand(pattern, "array_record")
        self.record_format, self.field, self.chat = record_format, field, chat
        self.name = name or f"array_record:{pattern}"
        self._src = grain.sources.ArrayRecordDataSource(self.files)
        if len(self._src) == 0:
            raise ValueError(f"array_record source: files matching {pattern!r} hold no records ({self.files})")

    def __len__(self) -> int:
        return len(self._src)

    def __getitem__(self, index: int) -> Document:
        raw = self._src[int(index)]
        where = f"{self.name} record {int(index)}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{where}: record is not UTF-8") from None
        if self.record_format == "text":
            doc = {"text": text}
        else:
            try:
                record = json.loads(text)
            except ValueError as e:
                raise ValueError(f"{where}: invalid JSON ({e})") from None
            doc = _record_to_document(record, self.field, self.chat, where)
        doc.update(source=self.name, index=int(index))
        return doc

    def __repr__(self) -> str:
        return f"ArrayRecordSource(files={len(self.files)}, records={len(self)}, format={self.record_format!r})"


class InMemorySource:
    """Documents held in memory: strings become {"text": s}; dicts are used as documents."""

    def __init__(self, items: Sequence[Union[str, Mapping]], name: str = "memory"):
        self.name = name
        self._docs = [{"text": x} if isinstance(x, str) else dict(x) for x in items]
        if not self._docs:
            raise ValueError(f"in-memory source {name!r} is empty")
        bad = [i for i, d in enumerate(self._docs) if "text" not in d and "messages" not in d]
        if bad:
            raise ValueError(f"in-memory source {name!r}: items {bad[:5]} have neither 'text' nor 'messages'")

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, index: int) -> Document:
        return {**self._docs[index], "source": self.name, "index": int(index)}

    def __repr__(self) -> str:
        return f"InMemorySource(name={self.name!r}, docs={len(self)})"


SOURCE_KINDS = ("stdlib", "directory", "jsonl", "chat_jsonl", "array_record", "seqio", "source")


@dataclasses.dataclass(frozen=True)
class SourceConfig:
    """One component of the data mixture."""

    kind: str = "stdlib"  # one of SOURCE_KINDS
    path: str = ""  # directory root | file path/glob (comma-separated list allowed) | seqio task/mixture name
    weight: float = 1.0  # relative rate of documents drawn from this source in the mixture
    pattern: str = "*.py"  # directory: file-name glob
    field: str = "text"  # jsonl/array_record json: the text field; chat_jsonl: the messages field
    record_format: str = "text"  # array_record: records are "text" (UTF-8) or "json" objects
    split: str = "train"  # seqio: split to read
    name: str = ""  # label carried in each document's 'source' (default: kind:path)
    # An object instead of a path: a seqio Task/Mixture (kind "seqio"), or any RandomAccessDataSource of documents
    # (kind "source": e.g. an InMemorySource in a notebook or test).
    provider: Any = dataclasses.field(default=None, compare=False)

    def __post_init__(self):
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"unknown source kind {self.kind!r}; expected one of {SOURCE_KINDS}")
        if not self.weight > 0:
            raise ValueError(f"source {self.kind}:{self.path} weight must be > 0, got {self.weight}")
        if self.kind in ("directory", "jsonl", "chat_jsonl", "array_record") and not self.path:
            raise ValueError(f"source kind {self.kind!r} needs a path")
        if self.kind == "seqio" and not self.path and self.provider is None:
            raise ValueError("source kind 'seqio' needs path= a registered task/mixture name or provider= an object")
        if self.kind == "source" and not (hasattr(self.provider, "__len__") and hasattr(self.provider, "__getitem__")):
            raise ValueError(f"source kind 'source' needs provider= a RandomAccessDataSource, got {self.provider!r}")

    @property
    def label(self) -> str:
        """Name used in documents and error messages."""
        return self.name or (f"{self.kind}:{self.path}" if self.path else self.kind)


def make_source(spec: SourceConfig):
    """The RandomAccessDataSource of a (non-seqio) SourceConfig."""
    if spec.kind == "stdlib":
        return DirectorySource(spec.path or stdlib_root(), spec.pattern, name=spec.label)
    if spec.kind == "directory":
        return DirectorySource(spec.path, spec.pattern, name=spec.label)
    if spec.kind in ("jsonl", "chat_jsonl"):
        chat = spec.kind == "chat_jsonl"
        field = "messages" if chat and spec.field == "text" else spec.field
        return JsonlSource(spec.path, field, chat=chat, name=spec.label)
    if spec.kind == "array_record":
        return ArrayRecordSource(spec.path, spec.record_format, spec.field, name=spec.label)
    if spec.kind == "source":
        if len(spec.provider) == 0:
            raise ValueError(f"source {spec.label!r}: the provided data source is empty")
        return spec.provider
    raise ValueError(f"source kind {spec.kind!r} is not a random-access source; expected one of "
                     f"{[k for k in SOURCE_KINDS if k != 'seqio']}")
