"""Tokenizers behind one tiny interface: a byte-level default and a tiktoken BPE loader for Kimi's format.

Interface (`Tokenizer`): `encode(text) -> list[int]`, `decode(ids) -> str`, `vocab_size`, `bos_id`, `eos_id`,
`pad_id`, and `special_tokens` (name -> id) / `special_id(name)`. Every tokenizer defines the chat-template markers
in `CHAT_SPECIAL_TOKENS`, so `data/chat.py` renders conversations for either.

- `ByteTokenizer`: ids 0..255 are the UTF-8 bytes; `<|bos|>`, `<|eos|>`, `<|pad|>` and the chat markers follow at
  256, 257, ... (`vocab_size` = 256 + number of specials). Nothing to download; the default for CPU runs.
- `TiktokenTokenizer.from_kimi_files(model_file, config)`: Kimi's `tiktoken.model` (lines `base64(token) rank`) plus
  the `added_tokens_decoder` / `bos_token` / `eos_token` / `pad_token` entries of its `tokenizer_config.json`;
  special ids start at `len(mergeable_ranks)` and unnamed slots are `<|reserved_token_{id}|>` (as in Kimi's
  `tokenization_kimi.py`). Markers the checkpoint lacks (e.g. `<|tool_call|>`) take the lowest unnamed reserved slot,
  so `vocab_size` never grows past the checkpoint's embedding.

Plain `encode` treats special-token strings in the text as ordinary text (a code file containing "<|im_end|>" cannot
forge a turn boundary); `encode(text, allow_special=True)` maps them to their ids (used by the serving harness).
"""

from __future__ import annotations

import abc
import base64
import dataclasses
import json
import os
import re
from typing import Iterator, Mapping, Optional, Sequence, Union

import numpy as np

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
# Chat-template markers (see data/chat.py for the rendered format).
IM_SYSTEM, IM_USER, IM_ASSISTANT, IM_TOOL = "<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_tool|>"
IM_MIDDLE, IM_END = "<|im_middle|>", "<|im_end|>"
TOOL_CALL_BEGIN, TOOL_CALL_END = "<|tool_call|>", "<|/tool_call|>"
CHAT_SPECIAL_TOKENS = (IM_SYSTEM, IM_USER, IM_ASSISTANT, IM_TOOL, IM_MIDDLE, IM_END, TOOL_CALL_BEGIN, TOOL_CALL_END)

# Kimi's pre-tokenizer regex, as in `tokenization_kimi.py` (needs tiktoken's fancy-regex: `&&` class intersection).
KIMI_PAT_STR = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
KIMI_NUM_RESERVED_SPECIAL_TOKENS = 256

# tiktoken's Rust core can overflow its stack on huge inputs or very long runs of (non-)whitespace
# (openai/tiktoken#195); text is cut into pieces below these sizes before encoding, as Kimi's tokenizer does.
_MAX_ENCODE_CHARS = 400_000
_MAX_RUN_CHARS = 25_000


class Tokenizer(abc.ABC):
    """The common interface of all tokenizers; subclasses set `_special` (name -> id) and implement the codec."""

    _special: dict[str, int]
    bos_id: int
    eos_id: int
    pad_id: int

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int:
        """Number of ids (rows of the embedding the model needs)."""

    @abc.abstractmethod
    def _encode_ordinary(self, text: str) -> list[int]:
        """Ids of `text` with no special-token parsing."""

    @abc.abstractmethod
    def _decode_ordinary(self, ids: Sequence[int]) -> str:
        """Text of non-special ids (invalid UTF-8 becomes U+FFFD)."""

    @property
    def special_tokens(self) -> Mapping[str, int]:
        """Special token name -> id (a copy)."""
        return dict(self._special)

    def special_id(self, name: str) -> int:
        """Id of a special token by name, e.g. `special_id("<|im_end|>")`."""
        if name not in self._special:
            raise ValueError(f"unknown special token {name!r}; this tokenizer has {sorted(self._special)}")
        return self._special[name]

    def is_special(self, token_id: int) -> bool:
        """True for ids of special tokens."""
        return token_id in self._special_ids

    @property
    def _special_ids(self) -> dict[int, str]:
        """Special id -> name (cached)."""
        inv = self.__dict__.get("_inv_special")
        if inv is None:
            inv = self.__dict__["_inv_special"] = {i: n for n, i in self._special.items()}
        return inv

    def encode(self, text: str, *, allow_special: bool = False) -> list[int]:
        """Ids of `text`; special-token strings are parsed only with `allow_special=True`."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects str, got {type(text).__name__}")
        if not allow_special:
            return self._encode_ordinary(text)
        ids: list[int] = []
        for piece, is_special in _split_on_specials(text, self._special_pattern()):
            ids.extend([self._special[piece]] if is_special else self._encode_ordinary(piece))
        return ids

    def encode_np(self, text: str) -> np.ndarray:
        """`encode(text)` as an int32 array [L] (the pipeline's fast path)."""
        return np.asarray(self._encode_ordinary(text), dtype=np.int32)

    def decode(self, ids: Sequence[int] | np.ndarray, *, skip_special: bool = False) -> str:
        """Text of `ids`; special ids render as their names unless `skip_special`."""
        ids = [int(i) for i in np.asarray(ids, dtype=np.int64).reshape(-1)]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} are outside [0, vocab_size={self.vocab_size})")
        out, run = [], []
        for i in ids:
            if i in self._special_ids:
                out.append(self._decode_ordinary(run))
                run = []
                if not skip_special:
                    out.append(self._special_ids[i])
            else:
                run.append(i)
        out.append(self._decode_ordinary(run))
        return "".join(out)

    def _special_pattern(self) -> re.Pattern:
        """Regex matching any special-token name, longest first (cached)."""
        pat = self.__dict__.get("_special_re")
        if pat is None:
            names = sorted(self._special, key=len, reverse=True)
            pat = self.__dict__["_special_re"] = re.compile("|".join(re.escape(n) for n in names))
        return pat


def _split_on_specials(text: str, pattern: re.Pattern) -> Iterator[tuple[str, bool]]:
    """Yield (piece, is_special) covering `text` in order."""
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            yield text[pos:m.start()], False
        yield m.group(0), True
        pos = m.end()
    if pos < len(text):
        yield text[pos:], False


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes are ids 0..255; special tokens follow from 256 in the order of `specials`."""

    def __init__(self, specials: Sequence[str] = (BOS, EOS, PAD) + CHAT_SPECIAL_TOKENS):
        if len(set(specials)) != len(specials):
            raise ValueError(f"duplicate special tokens in {list(specials)}")
        missing = [s for s in (BOS, EOS, PAD) if s not in specials]
        if missing:
            raise ValueError(f"ByteTokenizer specials must include {missing}")
        self._special = {name: 256 + i for i, name in enumerate(specials)}
        self.bos_id, self.eos_id, self.pad_id = self._special[BOS], self._special[EOS], self._special[PAD]

    @property
    def vocab_size(self) -> int:
        """256 byte ids plus the specials."""
        return 256 + len(self._special)

    def _encode_ordinary(self, text: str) -> list[int]:
        """The UTF-8 bytes of `text`."""
        return list(text.encode("utf-8"))

    def encode_np(self, text: str) -> np.ndarray:
        """UTF-8 bytes as int32 [L], without a Python list."""
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)

    def _decode_ordinary(self, ids: Sequence[int]) -> str:
        """Bytes back to text (a multi-byte character cut by a chunk boundary becomes U+FFFD)."""
        return bytes(ids).decode("utf-8", errors="replace")


class TiktokenTokenizer(Tokenizer):
    """Byte-level BPE via tiktoken: mergeable ranks + special tokens + a pre-tokenizer regex."""

    def __init__(self, mergeable_ranks: Mapping[bytes, int], special_tokens: Mapping[str, int], *,
                 bos: str, eos: str, pad: str, pat_str: str = KIMI_PAT_STR, name: str = "tiktoken"):
        import tiktoken  # deferred: the byte tokenizer must not need it

        _check_ranks(mergeable_ranks)
        clash = sorted(i for i in special_tokens.values() if i < len(mergeable_ranks))
        if clash:
            raise ValueError(f"special token ids {clash[:5]} collide with the {len(mergeable_ranks)} mergeable ranks")
        for role, tok in (("bos", bos), ("eos", eos), ("pad", pad)):
            if tok not in special_tokens:
                raise ValueError(f"{role} token {tok!r} is not among the special tokens")
        self._special = dict(special_tokens)
        self._n_vocab = max([len(mergeable_ranks) - 1, *self._special.values()]) + 1
        self._enc = tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=dict(mergeable_ranks),
                                      special_tokens=self._special)
        self.bos_id, self.eos_id, self.pad_id = self._special[bos], self._special[eos], self._special[pad]

    @classmethod
    def from_kimi_files(cls, model_file: Union[str, os.PathLike], config: Union[str, os.PathLike, Mapping, None],
                        *, pat_str: str = KIMI_PAT_STR,
                        num_reserved_special_tokens: int = KIMI_NUM_RESERVED_SPECIAL_TOKENS) -> "TiktokenTokenizer":
        """Load Kimi's `tiktoken.model` plus a `tokenizer_config.json` (path or dict) like `tokenization_kimi.py`."""
        ranks = load_tiktoken_ranks(model_file)
        cfg = _load_config(config)
        n_base = len(ranks)
        named = {int(i): _token_content(v) for i, v in cfg.get("added_tokens_decoder", {}).items()}
        top = max([n_base + num_reserved_special_tokens - 1, *named])
        specials = {named.get(i, f"<|reserved_token_{i}|>"): i for i in range(n_base, top + 1)}
        bos = _token_content(cfg.get("bos_token", "[BOS]"))
        eos = _token_content(cfg.get("eos_token", "[EOS]"))
        pad = _token_content(cfg.get("pad_token") or PAD)
        free = [i for i in range(n_base, top + 1) if i not in named]
        for tok in (bos, eos, pad) + CHAT_SPECIAL_TOKENS:
            if tok not in specials:
                if not free:
                    raise ValueError(f"no free reserved special-token slot left for {tok!r} in {model_file}")
                slot = free.pop(0)
                del specials[f"<|reserved_token_{slot}|>"]
                specials[tok] = slot
        return cls(ranks, specials, bos=bos, eos=eos, pad=pad, pat_str=pat_str, name=os.path.basename(model_file))

    @property
    def vocab_size(self) -> int:
        """Mergeable ranks plus special slots (largest id + 1)."""
        return self._n_vocab

    def _encode_ordinary(self, text: str) -> list[int]:
        """BPE ids; special-token strings are encoded as text."""
        ids: list[int] = []
        for piece in _bounded_pieces(text):
            ids.extend(self._enc.encode_ordinary(piece))
        return ids

    def _decode_ordinary(self, ids: Sequence[int]) -> str:
        """Concatenate the token bytes and decode UTF-8 (invalid sequences become U+FFFD)."""
        return self._enc.decode_bytes(list(ids)).decode("utf-8", errors="replace")


def _bounded_pieces(text: str) -> Iterator[str]:
    """Cut `text` into pieces of <= _MAX_ENCODE_CHARS with runs of (non-)whitespace <= _MAX_RUN_CHARS."""
    for start in range(0, len(text), _MAX_ENCODE_CHARS):
        block = text[start:start + _MAX_ENCODE_CHARS]
        begin, run, prev_space = 0, 0, None
        for i, ch in enumerate(block):
            space = ch.isspace()
            run = run + 1 if space == prev_space else 1
            prev_space = space
            if run > _MAX_RUN_CHARS:
                yield block[begin:i]
                begin, run = i, 1
        yield block[begin:]


def load_tiktoken_ranks(path: Union[str, os.PathLike]) -> dict[bytes, int]:
    """Parse a tiktoken BPE file: one `base64(token) rank` per line."""
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                tok, rank = line.split()
                ranks[base64.b64decode(tok, validate=True)] = int(rank)
            except ValueError as e:
                raise ValueError(f"{path}:{lineno}: expected 'base64(token) rank', got {line[:80]!r}") from e
    if not ranks:
        raise ValueError(f"tiktoken BPE file {path} holds no ranks")
    return ranks


def save_tiktoken_ranks(ranks: Mapping[bytes, int], path: Union[str, os.PathLike]) -> None:
    """Write mergeable ranks in the tiktoken BPE file format (sorted by rank)."""
    with open(path, "w") as f:
        for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(f"{base64.b64encode(tok).decode('ascii')} {rank}\n")


def _check_ranks(ranks: Mapping[bytes, int]) -> None:
    """Ranks must be the dense range 0..n-1 and include all 256 single bytes (so every text is encodable)."""
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ValueError(f"mergeable ranks must be exactly 0..{len(ranks) - 1} without gaps or repeats")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ValueError(f"mergeable ranks lack single bytes {missing[:8]}... ({len(missing)} missing)")


def _load_config(config: Union[str, os.PathLike, Mapping, None]) -> Mapping:
    """A tokenizer_config.json given as a path, a dict or None (no named specials)."""
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return config
    with open(config) as f:
        return json.load(f)


def _token_content(v: Union[str, Mapping]) -> str:
    """A token given as a string or as an HF AddedToken dict {"content": ...}."""
    return v["content"] if isinstance(v, Mapping) else str(v)


TOKENIZERS = ("byte", "kimi", "tiktoken")


@dataclasses.dataclass(frozen=True)
class TokenizerConfig:
    """Which tokenizer a run uses."""

    name: str = "byte"  # byte | kimi / tiktoken (Kimi's tiktoken.model format)
    path: str = ""  # tiktoken.model, or the directory holding it (tiktoken only)

    def __post_init__(self):
        if self.name not in TOKENIZERS:
            raise ValueError(f"tokenizer.name={self.name!r}; expected one of {TOKENIZERS}")

    def build(self) -> Tokenizer:
        """The tokenizer this config names."""
        return make_tokenizer(self.name, self.path or None)


def make_tokenizer(name: str = "byte", path: Optional[Union[str, os.PathLike]] = None) -> Tokenizer:
    """Tokenizer by name: "byte", or "kimi"/"tiktoken" with `path` = tiktoken.model or the directory holding it.

    For "kimi"/"tiktoken" a tokenizer_config.json next to the model file supplies the special tokens (optional).
    """
    if name == "byte":
        return ByteTokenizer()
    if name in ("kimi", "tiktoken"):
        if not path:
            raise ValueError(f"tokenizer {name!r} needs path= tiktoken.model or a directory holding it")
        model = os.path.join(path, "tiktoken.model") if os.path.isdir(path) else str(path)
        if not os.path.isfile(model):
            raise ValueError(f"tokenizer {name!r}: {model} does not exist")
        cfg = os.path.join(os.path.dirname(model), "tokenizer_config.json")
        return TiktokenTokenizer.from_kimi_files(model, cfg if os.path.isfile(cfg) else None)
    raise ValueError(f"unknown tokenizer {name!r}; expected one of {TOKENIZERS}")
