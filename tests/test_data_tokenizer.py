"""Tokenizers: byte-level ids and specials; a generated tiktoken BPE file in Kimi's format round-trips."""

import json

import numpy as np
import pytest

from composer2_jax.data import tokenizer as tk

TEXTS = ["", "hello world", "def f(x):\n    return x  # ünïcode ✓\n", "中文 and emoji 🚀\t\r\n", "   \n\n  x"]
# Consistent merges: each token is reachable from two lower-rank tokens (as in any trained BPE vocabulary).
MERGES = [b"de", b"def", b" d", b"re", b"ret", b"retu", b"retur", b"return", b"  ", b"    ", b"in", b"\xe4\xb8"]


def _naive_bpe(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """Reference byte-pair merge: repeatedly merge the adjacent pair whose concatenation has the lowest rank."""
    parts = [bytes([b]) for b in piece]
    while True:
        cands = [(ranks[a + b], i) for i, (a, b) in enumerate(zip(parts, parts[1:])) if a + b in ranks]
        if not cands:
            return [ranks[p] for p in parts]
        _, i = min(cands)
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


@pytest.fixture(scope="module")
def ranks():
    r = {bytes([b]): b for b in range(256)}
    for m in MERGES:
        r[m] = len(r)
    return r


@pytest.fixture(scope="module")
def kimi_dir(tmp_path_factory, ranks):
    d = tmp_path_factory.mktemp("kimi_tok")
    tk.save_tiktoken_ranks(ranks, d / "tiktoken.model")
    n = len(ranks)
    config = {"added_tokens_decoder": {str(n): {"content": "[BOS]"}, str(n + 1): {"content": "[EOS]"},
                                       str(n + 2): {"content": "<|im_end|>"}, str(n + 3): {"content": "[PAD]"}},
              "bos_token": "[BOS]", "eos_token": {"content": "[EOS]"}, "pad_token": "[PAD]"}
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    return d


def test_byte_tokenizer_ids_and_specials():
    tok = tk.ByteTokenizer()
    assert tok.vocab_size == 256 + 3 + len(tk.CHAT_SPECIAL_TOKENS)
    assert sorted(tok.special_tokens.values()) == list(range(256, tok.vocab_size))
    assert (tok.bos_id, tok.eos_id, tok.pad_id) == (256, 257, 258)
    assert tok.special_id("<|im_end|>") == tok.special_tokens["<|im_end|>"]
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == list(text.encode("utf-8"))
        assert tok.decode(ids) == text
        np.testing.assert_array_equal(tok.encode_np(text), np.asarray(ids, np.int32))
        assert tok.encode_np(text).dtype == np.int32


def test_special_strings_are_text_unless_allowed():
    tok = tk.ByteTokenizer()
    text = "a<|im_end|>b"
    assert tok.encode(text) == list(text.encode())
    assert tok.encode(text, allow_special=True) == [ord("a"), tok.special_id("<|im_end|>"), ord("b")]
    ids = [tok.bos_id] + tok.encode("hi") + [tok.eos_id]
    assert tok.decode(ids) == "<|bos|>hi<|eos|>"
    assert tok.decode(ids, skip_special=True) == "hi"


def test_byte_tokenizer_errors():
    tok = tk.ByteTokenizer()
    with pytest.raises(ValueError, match="outside"):
        tok.decode([tok.vocab_size])
    with pytest.raises(ValueError, match="unknown special token"):
        tok.special_id("<|nope|>")
    with pytest.raises(ValueError, match="unknown tokenizer"):
        tk.make_tokenizer("sentencepiece")


def test_bpe_file_round_trip(kimi_dir, ranks):
    tok = tk.make_tokenizer("kimi", path=str(kimi_dir))
    assert isinstance(tok, tk.TiktokenTokenizer)
    assert tk.load_tiktoken_ranks(kimi_dir / "tiktoken.model") == ranks
    for text in TEXTS:
        ids = tok.encode(text)
        assert all(0 <= i < len(ranks) for i in ids)
        assert tok.decode(ids) == text
    # Merges are applied inside the pre-tokenizer's pieces ("   " and " return" for Kimi's pat_str).
    assert tok.encode("def") == [ranks[b"def"]]
    assert tok.encode("    return") == _naive_bpe(b"   ", ranks) + _naive_bpe(b" return", ranks)
    assert _naive_bpe(b" return", ranks) == [ord(" "), ranks[b"return"]]


@pytest.mark.parametrize("word", ["define", "return", "redefine", "indeed", "retdefin"])
def test_bpe_matches_naive_reference(kimi_dir, ranks, word):
    tok = tk.make_tokenizer("kimi", path=str(kimi_dir))
    assert tok.encode(word) == _naive_bpe(word.encode(), ranks)


def test_kimi_special_token_layout(kimi_dir, ranks):
    tok = tk.make_tokenizer("kimi", path=str(kimi_dir))
    n = len(ranks)
    assert tok.vocab_size == n + tk.KIMI_NUM_RESERVED_SPECIAL_TOKENS
    assert (tok.bos_id, tok.eos_id, tok.special_id("<|im_end|>"), tok.pad_id) == (n, n + 1, n + 2, n + 3)
    # Markers missing from the config take the lowest unnamed reserved slots, inside the vocabulary.
    missing = [m for m in tk.CHAT_SPECIAL_TOKENS if m != "<|im_end|>"]
    assert [tok.special_id(m) for m in missing] == list(range(n + 4, n + 4 + len(missing)))
    assert tok.special_tokens[f"<|reserved_token_{n + 4 + len(missing)}|>"] == n + 4 + len(missing)
    ids = tok.encode("x<|tool_call|>y", allow_special=True)
    assert ids == [ord("x"), tok.special_id("<|tool_call|>"), ord("y")]
    assert tok.decode(ids) == "x<|tool_call|>y"


def test_bpe_loader_errors(tmp_path, ranks):
    bad = tmp_path / "bad.model"
    bad.write_text("not-base64!! 0\n")
    with pytest.raises(ValueError, match="bad.model:1"):
        tk.load_tiktoken_ranks(bad)
    partial = {bytes([b]): b for b in range(200)}
    with pytest.raises(ValueError, match="lack single bytes"):
        tk.TiktokenTokenizer(partial, {"[B]": 300, "[E]": 301, "[P]": 302}, bos="[B]", eos="[E]", pad="[P]")
    with pytest.raises(ValueError, match="collide"):
        tk.TiktokenTokenizer(ranks, {"[B]": 3, "[E]": 1000, "[P]": 1001}, bos="[B]", eos="[E]", pad="[P]")
    with pytest.raises(ValueError, match="does not exist"):
        tk.make_tokenizer("kimi", path=str(tmp_path))
    with pytest.raises(ValueError, match="needs path"):
        tk.make_tokenizer("tiktoken")


def test_tiktoken_name_takes_the_model_file(kimi_dir):
    by_file = tk.make_tokenizer("tiktoken", path=str(kimi_dir / "tiktoken.model"))
    by_dir = tk.make_tokenizer("kimi", path=str(kimi_dir))
    assert by_file.special_tokens == by_dir.special_tokens and by_file.encode("define") == by_dir.encode("define")


def test_long_runs_are_encoded_in_bounded_pieces(kimi_dir):
    tok = tk.make_tokenizer("kimi", path=str(kimi_dir))
    text = "a" * (tk._MAX_RUN_CHARS + 5) + " " * 3 + "b"
    assert tok.decode(tok.encode(text)) == text
