"""Tokenizers behind one tiny interface: a byte-level default, a tiktoken BPE loader for Kimi's format, and HF
`tokenizer.json` files through the `tokenizers` library.

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
- `HFTokenizer.from_dir(path)`: a `tokenizer.json` (loaded by `tokenizers.Tokenizer.from_file`) plus the
  `bos_token` / `eos_token` / `pad_token` / `added_tokens_decoder` / `chat_template` of the `tokenizer_config.json`
  next to it. Added tokens marked special, and added tokens spelled like markers (`<...>`, e.g. DeepSeek's
  `<｜User｜>`, which is not marked special), are special tokens here; other added tokens are ordinary vocabulary.

`data.chat.get_chat_format(tokenizer)` is the chat markup the tokenizer's own special tokens call for:
`kimi_k2` when Kimi's tool-call tokens exist, `deepseek_v3` when DeepSeek-V3's do, `project` otherwise.
`check_vocab(tokenizer, model_vocab_size)` refuses a tokenizer whose ids do not fit the model's embedding.

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
# Every token the chat format and the agent harness (data/chat.py, env/harness.py) need as one id: a BPE trained here
# (data/bpe.py) reserves them as special tokens at ids 0.. in this order, and the `bpe` loader requires them.
HARNESS_SPECIAL_TOKENS = (BOS, EOS, PAD) + CHAT_SPECIAL_TOKENS

# The models' own tool-call markup (data/chat.py renders it): Kimi K2's and DeepSeek-V3's special tokens.
KIMI_SECTION_BEGIN, KIMI_SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
KIMI_CALL_BEGIN, KIMI_CALL_END = "<|tool_call_begin|>", "<|tool_call_end|>"
KIMI_ARG_BEGIN = "<|tool_call_argument_begin|>"
KIMI_TOOL_TOKENS = (KIMI_SECTION_BEGIN, KIMI_CALL_BEGIN, KIMI_ARG_BEGIN, KIMI_CALL_END, KIMI_SECTION_END)
DS_BOS, DS_EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
DS_USER, DS_ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
DS_CALLS_BEGIN, DS_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN, DS_CALL_END, DS_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
DS_OUTPUTS_BEGIN, DS_OUTPUTS_END = "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>"
DS_OUTPUT_BEGIN, DS_OUTPUT_END = "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"
DEEPSEEK_TOOL_TOKENS = (DS_CALLS_BEGIN, DS_CALL_BEGIN, DS_SEP, DS_CALL_END, DS_CALLS_END)


def native_tool_markup(special_names) -> str:
    """'kimi_k2' when the special tokens hold all of Kimi's tool-call tokens, 'deepseek_v3' when DeepSeek-V3's,
    'project' otherwise: the chat format data/chat.py renders for such a tokenizer."""
    if all(t in special_names for t in KIMI_TOOL_TOKENS):
        return "kimi_k2"
    if all(t in special_names for t in DEEPSEEK_TOOL_TOKENS):
        return "deepseek_v3"
    return "project"

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

    def byte_lengths(self) -> np.ndarray:
        """UTF-8 bytes each id stands for, int32 [vocab_size], computed once: 0 for special ids (markup, not text).

        Bits per byte divides a loss by the bytes of its target tokens with this table (train/metrics.py)."""
        table = self.__dict__.get("_byte_lengths")
        if table is None:
            table = np.zeros(self.vocab_size, np.int32)
            for i in range(self.vocab_size):
                if i not in self._special_ids:
                    table[i] = self._token_byte_length(i)
            table.flags.writeable = False
            self.__dict__["_byte_lengths"] = table
        return table

    def _token_byte_length(self, token_id: int) -> int:
        """UTF-8 bytes of one non-special id (subclasses give the exact count; this decodes the id alone, which
        counts a token holding part of a multi-byte character as U+FFFD's 3 bytes)."""
        return len(self._decode_ordinary([token_id]).encode("utf-8"))

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

    def _token_byte_length(self, token_id: int) -> int:
        """Each byte id is one byte."""
        return 1


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
        self._n_ranks = len(mergeable_ranks)
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

    def _token_byte_length(self, token_id: int) -> int:
        """The length of the rank's byte string (0 for an id between the ranks and the special ids: no token)."""
        return len(self._enc.decode_single_token_bytes(token_id)) if token_id < self._n_ranks else 0


class HFTokenizer(Tokenizer):
    """A Hugging Face `tokenizer.json` run by the `tokenizers` library, with the specials of `tokenizer_config.json`.

    Special tokens are the added tokens marked special, and every added token spelled like a control marker
    (`<...>`, e.g. DeepSeek-V3's `<｜User｜>`, which its tokenizer.json does not mark special), from the tokenizer and
    the config's `added_tokens_decoder`. Plain `encode` never maps their strings to their ids: text that contains one
    runs through the normalizer, pre-tokenizer and model only (the library's `encode` would extract them), and other
    text takes the library's fast path, which gives the same ids. Other added tokens (vocabulary extensions such as
    whitespace runs) are ordinary tokens, split out of the text as the library does. When the tokenizer defines no
    native chat markup (`chat_format.name == "project"`), the project's markers in `CHAT_SPECIAL_TOKENS` that it
    lacks get new ids after its largest one (`vocab_size` grows: `check_vocab` says when the model's embedding is too
    small).
    """

    def __init__(self, tokenizer_file: Union[str, os.PathLike], config: Union[str, os.PathLike, Mapping, None] = None):
        from tokenizers import Tokenizer as _HFTok  # deferred: the byte tokenizer must not need it

        self.path = str(tokenizer_file)
        try:
            self._tok = _HFTok.from_file(self.path)
        except Exception as e:  # noqa: BLE001 - the library raises its own exception types
            raise ValueError(f"cannot load {self.path} with tokenizers.Tokenizer.from_file: {e}") from None
        cfg = _load_config(config)
        self.config = dict(cfg)
        self.chat_template = cfg.get("chat_template")
        added = {t.content: (int(i), bool(t.special)) for i, t in self._tok.get_added_tokens_decoder().items()}
        for i, v in cfg.get("added_tokens_decoder", {}).items():
            special = bool(v.get("special", True)) if isinstance(v, Mapping) else True
            added.setdefault(_token_content(v), (int(i), special))
        self._special = {c: i for c, (i, sp) in added.items() if sp or _is_marker(c)}
        plain = {c: i for c, (i, sp) in added.items() if c not in self._special}
        vocab = self._tok.get_vocab(with_added_tokens=False)
        self._n_vocab = max([-1, *vocab.values(), *(i for i, _ in added.values())]) + 1
        if native_tool_markup(self._special) == "project":
            for name in CHAT_SPECIAL_TOKENS:
                if name not in self._special and name not in vocab and name not in plain:
                    self._special[name] = self._n_vocab
                    self._n_vocab += 1
        self._plain_added = plain
        self._plain_re = _alternation(plain)
        self._special_in_tok = _alternation([c for c in self._special if c in added])

        def role(key: str) -> Optional[int]:
            name = cfg.get(key)
            if not name:
                return None
            name = _token_content(name)
            tid = self._special.get(name, plain.get(name, self._tok.token_to_id(name)))
            if tid is None:
                raise ValueError(f"{key}={name!r} of {self.path}'s tokenizer_config.json is not a token of the "
                                 "tokenizer")
            return tid

        eos = role("eos_token")
        if eos is None:
            raise ValueError(f"{self.path}: no eos_token (tokenizer_config.json next to tokenizer.json names it)")
        bos, pad = role("bos_token"), role("pad_token")
        self.eos_id = eos
        self.bos_id = eos if bos is None else bos
        self.pad_id = eos if pad is None else pad

    @classmethod
    def from_dir(cls, path: Union[str, os.PathLike]) -> "HFTokenizer":
        """A directory holding `tokenizer.json` (and optionally `tokenizer_config.json`), or the file itself."""
        path = str(path)
        file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
        if not os.path.isfile(file):
            raise ValueError(f"tokenizer 'hf': {file} does not exist")
        cfg = os.path.join(os.path.dirname(file), "tokenizer_config.json")
        return cls(file, cfg if os.path.isfile(cfg) else None)

    @property
    def vocab_size(self) -> int:
        """Largest id of the model vocabulary and the added/special tokens, plus one."""
        return self._n_vocab

    def _encode_ordinary(self, text: str) -> list[int]:
        """Ids with special-token strings encoded as text; other added tokens split out as the library does."""
        if not text:
            return []
        if self._special_in_tok is None or not self._special_in_tok.search(text):
            return self._tok.encode(text, add_special_tokens=False).ids
        ids: list[int] = []
        pieces = _split_on_specials(text, self._plain_re) if self._plain_re is not None else [(text, False)]
        for piece, is_added in pieces:
            ids.extend([self._plain_added[piece]] if is_added else self._pipeline(piece))
        return ids

    def _pipeline(self, text: str) -> list[int]:
        """normalizer -> pre-tokenizer -> model, with no added-token extraction."""
        norm = self._tok.normalizer.normalize_str(text) if self._tok.normalizer is not None else text
        pieces = self._tok.pre_tokenizer.pre_tokenize_str(norm) if self._tok.pre_tokenizer is not None \
            else [(norm, None)]
        model = self._tok.model
        return [t.id for piece, _ in pieces for t in model.tokenize(piece)]

    def _decode_ordinary(self, ids: Sequence[int]) -> str:
        """The tokenizer's decoder on non-special ids."""
        if not ids:
            return ""
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def _token_byte_length(self, token_id: int) -> int:
        """Byte-level BPE (a ByteLevel decoder): one byte per character of the token's string (GPT-2's byte alphabet);
        other decoders: `<0xNN>` byte-fallback tokens are one byte and `▁` is a space. Added tokens: their text."""
        token = self._tok.id_to_token(token_id)
        if token is None:  # an id the file leaves unused
            return 0
        if token in self._plain_added:
            return len(token.encode("utf-8"))
        if "_byte_level" not in self.__dict__:
            self.__dict__["_byte_level"] = _has_byte_level_decoder(self._tok)
        if self.__dict__["_byte_level"]:
            return sum(1 if c in _BYTE_LEVEL_CHARS else len(c.encode("utf-8")) for c in token)
        if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", token):
            return 1
        return len(token.replace("\u2581", " ").encode("utf-8"))


def _byte_level_chars() -> frozenset:
    """The 256 characters GPT-2's byte-level alphabet writes the bytes as (`bytes_to_unicode`)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    return frozenset(map(chr, printable + [256 + i for i in range(256 - len(printable))]))


_BYTE_LEVEL_CHARS = _byte_level_chars()


def _has_byte_level_decoder(tok) -> bool:
    """True when a `tokenizers.Tokenizer` decodes with ByteLevel (alone or inside a Sequence)."""
    if tok.decoder is None:
        return False
    state = json.loads(tok.decoder.__getstate__())
    return state.get("type") == "ByteLevel" or any(d.get("type") == "ByteLevel" for d in state.get("decoders", []))


def _is_marker(content: str) -> bool:
    """Spelled like a control token: `<...>` with no whitespace (`<｜User｜>`, `<think>`, `<|im_end|>`)."""
    return len(content) > 2 and content[0] == "<" and content[-1] == ">" and not any(c.isspace() for c in content)


def _alternation(strings) -> Optional[re.Pattern]:
    """A regex matching any of `strings`, longest first; None for none."""
    strings = sorted(set(strings), key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in strings)) if strings else None


def check_vocab(tokenizer: Tokenizer, model_vocab_size: int) -> None:
    """Raise ValueError when the tokenizer's ids do not fit a model embedding of `model_vocab_size` rows."""
    if tokenizer.vocab_size > model_vocab_size:
        raise ValueError(
            f"the tokenizer's ids need vocab_size={tokenizer.vocab_size} but the model's vocab_size is "
            f"{model_vocab_size}: ids >= {model_vocab_size} have no embedding row. Use the tokenizer the model "
            f"ships with, or a model config with vocab_size >= {tokenizer.vocab_size}")


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


TOKENIZERS = ("byte", "kimi", "tiktoken", "hf", "bpe", "auto")
# The tokenizer family each model preset (composer2_jax/model_config.py) ships with: Kimi's tiktoken.model for the Kimi
# presets, tokenizer.json for the others; the toy and gpu_small run on bytes, small on a BPE trained here (data/bpe.py).
PRESET_TOKENIZER = {"kimi_k2_5": "kimi", "kimi_k2": "kimi", "deepseek_v3": "hf", "llama2_70b_mla": "hf",
                    "mixtral_8x7b_mla": "hf", "toy": "byte", "small": "bpe", "gpu_small": "byte"}


@dataclasses.dataclass(frozen=True)
class TokenizerConfig:
    """Which tokenizer a run uses."""

    # byte | kimi / tiktoken (Kimi's tiktoken.model format) | hf (tokenizer.json) | bpe (a tokenizer.json trained by
    # `python -m composer2_jax.data.bpe`: loaded as hf, and every harness token must be its own special id) | auto
    name: str = "byte"
    # kimi/tiktoken: tiktoken.model or its directory; hf/bpe: tokenizer.json or its directory; auto: a directory
    path: str = ""

    def __post_init__(self):
        if self.name not in TOKENIZERS:
            raise ValueError(f"tokenizer.name={self.name!r}; expected one of {TOKENIZERS}")

    def build(self) -> Tokenizer:
        """The tokenizer this config names."""
        return make_tokenizer(self.name, self.path or None)


def make_tokenizer(name: str = "byte", path: Optional[Union[str, os.PathLike]] = None) -> Tokenizer:
    """Tokenizer by name: "byte"; "kimi"/"tiktoken" with `path` = tiktoken.model or the directory holding it;
    "hf" with `path` = tokenizer.json or the directory holding it; "bpe" the same, for a tokenizer trained by
    data/bpe.py (loaded as "hf", then every one of HARNESS_SPECIAL_TOKENS must be a special token of its own files);
    "auto" with `path` = a checkpoint or tokenizer directory (tokenizer.json -> hf, else tiktoken.model -> kimi).

    A tokenizer_config.json next to the model file supplies the special tokens (optional).
    """
    if name == "byte":
        return ByteTokenizer()
    if name in ("kimi", "tiktoken", "hf", "bpe", "auto") and not path:
        hint = "; train one with python -m composer2_jax.data.bpe --out DIR" if name == "bpe" else ""
        raise ValueError(f"tokenizer {name!r} needs path= (a tokenizer file or the directory holding it){hint}")
    if name == "auto":
        path = str(path)
        if not os.path.isdir(path):
            raise ValueError(f"tokenizer 'auto' needs a directory; {path} is not one")
        if os.path.isfile(os.path.join(path, "tokenizer.json")):
            name = "hf"
        elif os.path.isfile(os.path.join(path, "tiktoken.model")):
            name = "kimi"
        else:
            raise ValueError(f"tokenizer 'auto': {path} holds neither tokenizer.json (HF tokenizers) nor "
                             "tiktoken.model (Kimi)")
    if name == "hf":
        return HFTokenizer.from_dir(path)
    if name == "bpe":
        return require_harness_tokens(HFTokenizer.from_dir(path))
    if name in ("kimi", "tiktoken"):
        model = os.path.join(path, "tiktoken.model") if os.path.isdir(path) else str(path)
        if not os.path.isfile(model):
            raise ValueError(f"tokenizer {name!r}: {model} does not exist")
        cfg = os.path.join(os.path.dirname(model), "tokenizer_config.json")
        return TiktokenTokenizer.from_kimi_files(model, cfg if os.path.isfile(cfg) else None)
    raise ValueError(f"unknown tokenizer {name!r}; expected one of {TOKENIZERS}")


def require_harness_tokens(tok: HFTokenizer) -> HFTokenizer:
    """`tok` if its own files define every one of HARNESS_SPECIAL_TOKENS as a special token (one id each) and name
    the harness's bos/eos/pad; else a ValueError naming the missing token (HFTokenizer would append it as a new id)."""
    for name in HARNESS_SPECIAL_TOKENS:
        if tok._tok.token_to_id(name) is None or name not in tok._special:
            raise ValueError(f"tokenizer 'bpe': {tok.path} does not define the special token {name!r}; expected all "
                             f"of {list(HARNESS_SPECIAL_TOKENS)} as special tokens (retrain it with python -m "
                             f"composer2_jax.data.bpe --out DIR)")
    for role, name in (("bos", BOS), ("eos", EOS), ("pad", PAD)):
        got = getattr(tok, f"{role}_id")
        if got != tok._special[name]:
            raise ValueError(f"tokenizer 'bpe': {tok.path}'s tokenizer_config.json makes id {got} the {role}_token; "
                             f"expected {name!r} (id {tok._special[name]})")
    return tok


def preset_tokenizer(preset: str, path: str = "") -> TokenizerConfig:
    """The TokenizerConfig of a model preset's own tokenizer family (`PRESET_TOKENIZER`); `path` is the checkpoint or
    tokenizer directory (building a non-byte tokenizer without one is an error, never a silent fall back to bytes)."""
    if preset not in PRESET_TOKENIZER:
        raise ValueError(f"preset={preset!r} has no tokenizer family; expected one of {sorted(PRESET_TOKENIZER)}")
    return TokenizerConfig(PRESET_TOKENIZER[preset], path)
