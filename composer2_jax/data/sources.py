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
- `ParquetSource(pattern, field)`: Parquet files read one row group at a time (a few cached), located by the
  row-group metadata; a text column by name, or (`chat=True`) a messages column (list of structs) plus `tools`.
- `HFDatasetSource(path, field, split)`: a directory written by HF `datasets` `Dataset.save_to_disk` (or a
  `DatasetDict` one, with `split`), its arrow files memory-mapped with pyarrow; `datasets` is not needed to read it.
- `InMemorySource(items)`: texts or document dicts held in memory (tests, notebooks; `SourceConfig(kind="source",
  provider=...)` mixes it, or any other RandomAccessDataSource of documents, into a pipeline).
A source that resolves to zero documents raises a ValueError at construction naming the path or pattern.
"""

from __future__ import annotations

import collections
import dataclasses
import fnmatch
import glob
import hashlib
import json
import logging
import os
import sysconfig
import threading
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
        raise ValueError(f"{what} source: no files match {pattern!r}{_unset_hint(str(pattern))}")
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


def walk_files(root: str, pattern: str, exclude: Sequence[str] = DEFAULT_EXCLUDE_DIRS) -> list[str]:
    """Relative paths of the files under `root` matching `pattern`, sorted, without entering excluded or hidden
    directories (the candidates of a DirectorySource, before unreadable/binary/empty files are skipped)."""
    out, exclude = [], set(exclude)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in exclude and not d.startswith(".")]
        rel_dir = os.path.relpath(dirpath, root)
        out += [os.path.normpath(os.path.join(rel_dir, f)) for f in filenames if fnmatch.fnmatch(f, pattern)]
    return sorted(out)


class DirectorySource:
    """Text files under `root` whose names match `pattern`, in sorted relative-path order."""

    def __init__(self, root: str, pattern: str = "*.py", *, exclude_dirs: Sequence[str] = DEFAULT_EXCLUDE_DIRS,
                 name: str = ""):
        self.root = os.path.abspath(os.path.expanduser(root))
        self.name = name or f"dir:{self.root}"
        if not os.path.isdir(self.root):
            raise ValueError(f"directory source: {self.root!r} is not a directory{_unset_hint(root)}")
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
        return walk_files(self.root, pattern, exclude)

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

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the documents (for the token cache): root, pattern, and each file's size and mtime."""
        return {"kind": "directory", "root": self.root, "files": _file_stats(
            [os.path.join(self.root, rel) for rel in self._paths], relative_to=self.root)}

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

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the documents (for the token cache): files (size, mtime), field, chat."""
        return {"kind": "jsonl", "files": _file_stats(self.files), "field": self.field, "chat": self.chat}

    def __repr__(self) -> str:
        return f"JsonlSource(files={len(self.files)}, records={len(self)}, field={self.field!r}, chat={self.chat})"


def _file_stats(files: Sequence[str], relative_to: str = "") -> list[list]:
    """[[path, size, mtime_ns], ...] of files (paths relative to `relative_to` when given, else absolute)."""
    out = []
    for f in files:
        st = os.stat(f)
        out.append([os.path.relpath(f, relative_to) if relative_to else os.path.abspath(f), st.st_size,
                    st.st_mtime_ns])
    return out


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

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the documents (for the token cache): files (size, mtime), format, field, chat."""
        return {"kind": "array_record", "files": _file_stats(self.files), "record_format": self.record_format,
                "field": self.field, "chat": self.chat}

    def __repr__(self) -> str:
        return f"ArrayRecordSource(files={len(self.files)}, records={len(self)}, format={self.record_format!r})"


def _arrow_value_to_document(record: dict[str, Any], field: str, chat: bool, where: str) -> Document:
    """A row of an arrow table ({column: python value}) -> document. Arrow gives every struct field to every
    message (None where a message lacks it), so None-valued message keys are dropped; a `tools` column holding a
    JSON string is parsed."""
    if chat:
        value = record.get(field)
        if isinstance(value, list):
            record = dict(record, **{field: [{k: v for k, v in m.items() if v is not None}
                                             if isinstance(m, Mapping) else m for m in value]})
        tools = record.get("tools")
        if isinstance(tools, str):
            try:
                record["tools"] = json.loads(tools) if tools.strip() else None
            except ValueError as e:
                raise ValueError(f"{where}: column 'tools' holds invalid JSON ({e})") from None
    return _record_to_document(record, field, chat, where)


def _missing_column(where: str, field: str, names: Sequence[str], chat: bool) -> ValueError:
    what = "messages" if chat else "text"
    return ValueError(f"{where}: no column {field!r} (the {what} field); columns present: {list(names)}")


class _RowGroups:
    """Global row index -> (part, row) over parts (row groups, record batches) with `counts` rows each, plus an
    LRU cache of the last few parts read (each a {column: pyarrow Array})."""

    def __init__(self, counts: Sequence[int], cache_parts: int):
        self.starts = np.concatenate([[0], np.cumsum(np.asarray(counts, np.int64))])  # [P + 1]
        self.cache_parts = max(1, int(cache_parts))
        self._init_cache()

    def _init_cache(self):
        self._cache: "collections.OrderedDict[int, dict]" = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self.starts[-1])

    def locate(self, index: int) -> tuple[int, int]:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"row {index} out of range for {n} rows")
        index %= n
        part = int(np.searchsorted(self.starts, index, side="right")) - 1
        return part, index - int(self.starts[part])

    def get(self, part: int, load) -> dict:
        """The columns of `part` (loaded by `load(part)` on a miss; the oldest cached part is evicted)."""
        with self._lock:
            cols = self._cache.get(part)
            if cols is not None:
                self._cache.move_to_end(part)
                return cols
        cols = load(part)
        with self._lock:
            self._cache[part] = cols
            while len(self._cache) > self.cache_parts:
                self._cache.popitem(last=False)
        return cols

    def __getstate__(self):
        return {"starts": self.starts, "cache_parts": self.cache_parts}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_cache()


class ParquetSource:
    """Parquet files, one document per row: random access through the row-group metadata; only the row group
    holding a requested row is read (its `field` and, for chats, `tools` columns), and a few are kept cached."""

    def __init__(self, pattern: Union[str, Sequence[str]], field: str = "text", *, chat: bool = False,
                 name: str = "", cache_row_groups: int = 4):
        self.files = _expand(pattern, "parquet")
        self.field, self.chat = field, chat
        self.name = name or f"parquet:{pattern}"
        self._columns: list[list[str]] = []  # per file: the columns read
        parts, counts = [], []
        for i, path in enumerate(self.files):
            pf = _open_parquet(path)
            names = pf.schema_arrow.names
            if field not in names:
                raise _missing_column(f"parquet source: {path}", field, names, chat)
            self._columns.append([field] + (["tools"] if chat and "tools" in names else []))
            md = pf.metadata
            for rg in range(md.num_row_groups):
                if md.row_group(rg).num_rows:
                    parts.append((i, rg))
                    counts.append(md.row_group(rg).num_rows)
        self._parts = parts  # [(file index, row group)] of the non-empty row groups
        self._rows = _RowGroups(counts, cache_row_groups)
        self._init_handles()
        if not len(self._rows):
            raise ValueError(f"parquet source: files matching {pattern!r} hold no rows ({self.files})")

    def __len__(self) -> int:
        return len(self._rows)

    def _init_handles(self):
        self._handles: dict[int, Any] = {}  # file index -> pyarrow ParquetFile, opened on first use
        self._file_locks = [threading.Lock() for _ in self.files]  # one reader per file at a time (grain threads)

    def _load(self, part: int) -> dict:
        i, rg = self._parts[part]
        with self._file_locks[i]:
            pf = self._handles.get(i)
            if pf is None:
                pf = self._handles[i] = _open_parquet(self.files[i])
            table = pf.read_row_group(rg, columns=self._columns[i])
        return {c: table.column(c).combine_chunks() for c in self._columns[i]}

    def __getitem__(self, index: int) -> Document:
        part, row = self._rows.locate(int(index))
        cols = self._rows.get(part, self._load)
        i, rg = self._parts[part]
        where = f"{self.files[i]} row group {rg} row {row}"
        doc = _arrow_value_to_document({c: a[row].as_py() for c, a in cols.items()}, self.field, self.chat, where)
        doc.update(path=self.files[i], source=self.name, index=int(index))
        return doc

    def __getstate__(self):  # ParquetFile handles and locks are recreated after unpickling
        return {k: v for k, v in self.__dict__.items() if k not in ("_handles", "_file_locks")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_handles()

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the documents (for the token cache): files (size, mtime), field, chat."""
        return {"kind": "parquet", "files": _file_stats(self.files), "field": self.field, "chat": self.chat}

    def __repr__(self) -> str:
        return f"ParquetSource(files={len(self.files)}, rows={len(self)}, field={self.field!r}, chat={self.chat})"


def _open_parquet(path: str):
    """pyarrow ParquetFile of `path`; ValueError naming the file when it is empty or not Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if os.path.getsize(path) == 0:
        raise ValueError(f"parquet source: {path} is empty (0 bytes); expected a Parquet file")
    try:
        return pq.ParquetFile(path, memory_map=True)
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"parquet source: {path} is not a readable Parquet file ({e})") from None


class HFDatasetSource:
    """A `datasets.Dataset.save_to_disk` directory (or a `DatasetDict` one and its `split`), read without the
    `datasets` package: state.json lists the arrow files (Arrow IPC streams), which are memory-mapped; rows are
    located by record batch."""

    def __init__(self, path: str, field: str = "text", *, split: str = "train", chat: bool = False,
                 name: str = "", cache_batches: int = 16):
        root = os.path.abspath(os.path.expanduser(path))
        self.name = name or f"hf_dataset:{path}"
        if not os.path.isdir(root):
            raise ValueError(f"hf_dataset source: {path!r} is not a directory{_unset_hint(path)}; expected one "
                             f"written by datasets' save_to_disk")
        self.split = None
        dict_json = os.path.join(root, "dataset_dict.json")
        if os.path.isfile(dict_json):
            splits = _read_json(dict_json, "hf_dataset source").get("splits", [])
            if split not in splits:
                raise ValueError(f"hf_dataset source: {root} has no split {split!r}; splits present: {splits}")
            root, self.split = os.path.join(root, split), split
        state_json = os.path.join(root, "state.json")
        if not os.path.isfile(state_json):
            raise ValueError(f"hf_dataset source: {root} holds neither state.json (Dataset.save_to_disk) nor "
                             f"dataset_dict.json (DatasetDict.save_to_disk)")
        state = _read_json(state_json, "hf_dataset source")
        if state.get("_indices_data_files"):
            raise ValueError(f"hf_dataset source: {root} stores an indices mapping; save it with "
                             f"flatten_indices() first")
        self.root, self.field, self.chat = root, field, chat
        self.fingerprint_id = str(state.get("_fingerprint", ""))
        self.files = [os.path.join(root, f["filename"]) for f in state.get("_data_files", [])]
        if not self.files:
            raise ValueError(f"hf_dataset source: {state_json} lists no data files")
        self._columns, counts, self._parts = [], [], []
        self._batches: dict[int, list] = {}  # file index -> its record batches (memory-mapped)
        for i, f in enumerate(self.files):
            batches, names = self._open(f)
            self._batches[i] = batches
            if field not in names:
                raise _missing_column(f"hf_dataset source: {f}", field, names, chat)
            self._columns.append([field] + (["tools"] if chat and "tools" in names else []))
            for b, batch in enumerate(batches):
                if batch.num_rows:
                    self._parts.append((i, b))
                    counts.append(batch.num_rows)
        self._rows = _RowGroups(counts, cache_batches)
        if not len(self._rows):
            raise ValueError(f"hf_dataset source: {root} holds no rows ({self.files})")

    @staticmethod
    def _open(path: str) -> tuple[list, list[str]]:
        """The record batches (memory-mapped, zero-copy) and column names of an arrow file; ValueError naming it."""
        import pyarrow as pa

        if not os.path.isfile(path):
            raise ValueError(f"hf_dataset source: data file {path} is missing")
        if os.path.getsize(path) == 0:
            raise ValueError(f"hf_dataset source: {path} is empty (0 bytes); expected an Arrow file")
        try:
            mm = pa.memory_map(path)
            try:
                reader = pa.ipc.open_stream(mm)  # datasets writes the IPC streaming format
                batches = list(reader)
            except pa.ArrowInvalid:
                reader = pa.ipc.open_file(mm)
                batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        except (pa.ArrowException, OSError) as e:
            raise ValueError(f"hf_dataset source: {path} is not a readable Arrow file ({e})") from None
        return batches, reader.schema.names

    def __len__(self) -> int:
        return len(self._rows)

    def _load(self, part: int) -> dict:
        i, b = self._parts[part]
        if i not in self._batches:
            self._batches[i] = self._open(self.files[i])[0]
        batch = self._batches[i][b]
        return {c: batch.column(c) for c in self._columns[i]}

    def __getitem__(self, index: int) -> Document:
        part, row = self._rows.locate(int(index))
        cols = self._rows.get(part, self._load)
        i, _ = self._parts[part]
        where = f"{self.files[i]} row {int(index)}"
        doc = _arrow_value_to_document({c: a[row].as_py() for c, a in cols.items()}, self.field, self.chat, where)
        doc.update(path=self.files[i], source=self.name, index=int(index))
        return doc

    def __getstate__(self):
        return {**self.__dict__, "_batches": {}}  # memory maps are reopened on first use

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the documents (for the token cache): the dataset fingerprint, files, field, chat."""
        return {"kind": "hf_dataset", "fingerprint": self.fingerprint_id, "files": _file_stats(self.files),
                "field": self.field, "chat": self.chat}

    def __repr__(self) -> str:
        return (f"HFDatasetSource(root={self.root!r}, rows={len(self)}, field={self.field!r}, "
                f"chat={self.chat})")


def _read_json(path: str, what: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{what}: cannot read {path} as JSON ({e})") from None


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

    def fingerprint(self) -> dict[str, Any]:
        """A digest of the documents' contents (for the token cache)."""
        h = hashlib.sha256()
        for d in self._docs:
            h.update(json.dumps({k: d[k] for k in ("text", "messages", "tools") if k in d}, sort_keys=True,
                                ensure_ascii=False, default=str).encode())
            h.update(b"\n")
        return {"kind": "memory", "docs": len(self._docs), "sha256": h.hexdigest()}

    def __repr__(self) -> str:
        return f"InMemorySource(name={self.name!r}, docs={len(self)})"


SOURCE_KINDS = ("stdlib", "directory", "jsonl", "chat_jsonl", "array_record", "parquet", "chat_parquet", "hf_dataset",
                "chat_hf_dataset", "seqio", "source")
_PATH_KINDS = ("directory", "jsonl", "chat_jsonl", "array_record", "parquet", "chat_parquet", "hf_dataset",
               "chat_hf_dataset")


@dataclasses.dataclass(frozen=True)
class SourceConfig:
    """One component of the data mixture."""

    kind: str = "stdlib"  # one of SOURCE_KINDS
    # directory root | file path/glob (comma-separated list allowed) | save_to_disk directory | seqio task/mixture
    path: str = ""
    weight: float = 1.0  # relative rate of documents drawn from this source in the mixture
    pattern: str = "*.py"  # directory: file-name glob
    field: str = "text"  # jsonl/parquet/hf_dataset/array_record json: the text field; chat_*: the messages field
    record_format: str = "text"  # array_record: records are "text" (UTF-8) or "json" objects
    split: str = "train"  # seqio, hf_dataset of a DatasetDict: split to read
    name: str = ""  # label carried in each document's 'source' (default: kind:path)
    # An object instead of a path: a seqio Task/Mixture (kind "seqio"), or any RandomAccessDataSource of documents
    # (kind "source": e.g. an InMemorySource in a notebook or test).
    provider: Any = dataclasses.field(default=None, compare=False)

    def __post_init__(self):
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"unknown source kind {self.kind!r}; expected one of {SOURCE_KINDS}")
        if not self.weight > 0:
            raise ValueError(f"source {self.kind}:{self.path} weight must be > 0, got {self.weight}")
        if self.kind in _PATH_KINDS and not self.path:
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
    if spec.kind in ("parquet", "chat_parquet", "hf_dataset", "chat_hf_dataset"):
        chat = spec.kind.startswith("chat_")
        field = "messages" if chat and spec.field == "text" else spec.field
        if spec.kind.endswith("parquet"):
            return ParquetSource(spec.path, field, chat=chat, name=spec.label)
        return HFDatasetSource(spec.path, field, split=spec.split, chat=chat, name=spec.label)
    if spec.kind == "source":
        if len(spec.provider) == 0:
            raise ValueError(f"source {spec.label!r}: the provided data source is empty")
        return spec.provider
    raise ValueError(f"source kind {spec.kind!r} is not a random-access source; expected one of "
                     f"{[k for k in SOURCE_KINDS if k != 'seqio']}")


# ------------------------------------------------------------------------------------------------ mixtures as data

MIXTURE_KEYS = ("description", "sources")


def _repo_root() -> str:
    """The directory holding the composer2_jax package (the repository root in a checkout)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def resolve_mixture_path(path: str) -> str:
    """A mixture file path: absolute, or relative to the working directory, else to the repository root (so
    experiment configs can name `experiments/mixtures/x.json` from anywhere); ValueError naming where it looked."""
    p = os.path.expanduser(os.path.expandvars(path))
    candidates = [p] if os.path.isabs(p) else [os.path.abspath(p), os.path.join(_repo_root(), p)]
    for c in candidates:
        if os.path.isfile(c):
            return c
    raise ValueError(f"data.mixture={path!r}: no such file (looked at {candidates}); expected a JSON mixture file "
                     f"(a list of source dicts, or {{'description': ..., 'sources': [...]}})")


def load_mixture(path: str) -> tuple[SourceConfig, ...]:
    """The SourceConfigs of a JSON mixture file.

    The file holds a list of source dicts, or {"description": "...", "sources": [...]}; each dict takes the keys of
    `SourceConfig` (kind, path, weight, pattern, field, record_format, split, name). A relative `path` is relative
    to the mixture file's directory, after `$VAR`/`${VAR}` and `~` expansion (kinds stdlib with no path and seqio
    names are left as they are). Unknown keys and bad values raise a ValueError naming the file and the entry.
    """
    from composer2_jax import schema  # deferred: keeps the sources importable on their own

    file = resolve_mixture_path(path)
    data = _read_json(file, "data.mixture")
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - set(MIXTURE_KEYS))
        if unknown:
            raise ValueError(f"mixture {file}: unknown top-level keys {unknown}; expected {list(MIXTURE_KEYS)}")
        data = data.get("sources")
    if not isinstance(data, list) or not data:
        raise ValueError(f"mixture {file}: expected a non-empty list of sources (or an object with 'sources'), "
                         f"got {type(data).__name__}")
    out = []
    for i, entry in enumerate(data):
        where = f"mixture {os.path.basename(file)} sources[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected an object with SourceConfig keys, got {entry!r}")
        if "provider" in entry:
            raise ValueError(f"{where}: 'provider' (an in-process object) cannot be given in a mixture file")
        entry = dict(entry)
        if entry.get("path") and entry.get("kind", "stdlib") != "seqio":
            entry["path"] = ",".join(_resolve_relative(p.strip(), os.path.dirname(file))
                                     for p in str(entry["path"]).split(",") if p.strip())
        out.append(schema.from_config_dict(SourceConfig, entry, where))
    return tuple(out)


def _resolve_relative(path: str, base: str) -> str:
    """`path` with variables and ~ expanded, joined to `base` when relative (left as is while a variable is unset,
    so the source's error names the unexpanded path)."""
    p = os.path.expanduser(os.path.expandvars(path))
    return p if os.path.isabs(p) or "$" in p else os.path.normpath(os.path.join(base, p))


def _unset_hint(path: str) -> str:
    return " (an environment variable in it is unset)" if "$" in path else ""
