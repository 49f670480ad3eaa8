"""A byte-level BPE trained on the corpus with `tokenizers` (data/bpe.py) loads as any model's tokenizer does."""

import json
import random

import numpy as np
import pytest

from composer2_jax.data import bpe
from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import get_chat_format, render_chat
from composer2_jax.data.pipeline import DataConfig, document_ids

TEXTS = ["def add(a, b):\n    return a + b\n", "import os\nfor name in os.listdir('.'):\n    print(name)\n",
         "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"] * 40


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    return bpe.train_bpe(TEXTS, 400, str(tmp_path_factory.mktemp("bpe")))


def test_trained_bpe_loads_through_the_hf_path_with_the_harness_tokens(bpe_dir):
    tok = tk.make_tokenizer("auto", bpe_dir)
    assert isinstance(tok, tk.HFTokenizer) and 267 < tok.vocab_size <= 400  # as many merges as the corpus has
    assert [tok.special_id(t) for t in bpe.RESERVED] == list(range(len(bpe.RESERVED)))
    assert (tok.bos_id, tok.eos_id, tok.pad_id) == (0, 1, 2) and get_chat_format(tok).name == "project"
    text = TEXTS[1] + "naïve 🐍 <|im_end|>"
    ids = tok.encode(text)
    assert tok.decode(ids) == text and tok.special_id(tk.IM_END) not in ids  # plain text never forges a marker
    assert len(ids) < len(text.encode()) / 1.5  # merges learnt: fewer ids than bytes on the training domain
    chat = render_chat([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}], tok)
    assert tok.special_id(tk.IM_ASSISTANT) in chat.ids and sum(chat.loss_mask) == len(tok.encode("ok")) + 1


def test_cli_writes_a_loadable_directory(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    bpe.main(["--out", str(tmp_path / "tok"), "--vocab", "300", "--corpus", str(corpus)])
    line = json.loads(capsys.readouterr().out)
    assert line["vocab_size"] == 300 and tk.make_tokenizer("hf", str(tmp_path / "tok")).vocab_size == 300


def test_a_vocabulary_too_small_for_bytes_and_reserved_tokens_is_refused(tmp_path):
    with pytest.raises(ValueError, match="vocab_size=200; expected at least 267"):
        bpe.train_bpe(TEXTS, 200, str(tmp_path))


def test_chat_documents_get_no_second_bos_when_the_format_renders_one(bpe_dir):
    tok = tk.make_tokenizer("auto", bpe_dir)
    msgs = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}
    ids, _ = document_ids(msgs, tok, DataConfig(add_bos=True))
    assert ids[0] == tok.bos_id and ids[1] != tok.bos_id  # the project format: the pipeline adds the one BOS
    assert np.sum(ids == tok.bos_id) == 1


# ---------------------------------------------------------------- trained on the stdlib (the default corpus), toy size


def _stdlib_texts(max_bytes: int = 300_000) -> list[str]:
    """The stdlib's first documents up to about `max_bytes` of UTF-8."""
    texts, n = [], 0
    for text in bpe.corpus_texts(["stdlib"]):
        texts.append(text)
        n += len(text.encode())
        if n >= max_bytes:
            return texts
    return texts


@pytest.fixture(scope="module")
def stdlib_bpe(tmp_path_factory):
    """(the trained tokenizers.Tokenizer, its directory, the texts): 512 ids (the toy model's) on ~300 KB of stdlib."""
    texts = _stdlib_texts()
    model = bpe.train_bpe_model(texts, bpe.preset_vocab_size("toy"))
    out = str(tmp_path_factory.mktemp("stdlib_bpe"))
    bpe.save_bpe(model, out)
    return model, out, texts


def _random_text(rng: random.Random, n: int) -> str:
    """Any code points but surrogates: ASCII, controls and NUL, Latin-1, CJK, emoji, combining marks, private use."""
    ranges = [(0, 0x7F), (0x80, 0xFF), (0x300, 0x36F), (0x4E00, 0x9FFF), (0xE000, 0xF8FF), (0x1F300, 0x1FAFF),
              (0x10000, 0x10FFFF)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        c = rng.randint(lo, hi)
        out.append(chr(c if not 0xD800 <= c <= 0xDFFF else 0x20))
    return "".join(out)


def test_stdlib_bpe_round_trips_any_text_and_byte_string(stdlib_bpe):
    _, out, texts = stdlib_bpe
    tok = tk.make_tokenizer("bpe", out)
    rng = random.Random(0)
    samples = [_random_text(rng, rng.randint(0, 200)) for _ in range(50)]
    samples += [bytes(rng.randrange(256) for _ in range(300)).decode("latin-1"), "\x00\x00\r\n\t", texts[0][:5000]]
    for text in samples:
        assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode(texts[0])) < len(texts[0].encode()) / 1.5  # 245 merges compress the training domain
    # any byte string, also invalid UTF-8: the concatenated byte tokens give the bytes back
    raw = bytes(range(256)) + b"\xff\xfe\x80abc\xc3"
    b2u = _gpt2_bytes_to_unicode()
    ids = [tok._tok.token_to_id(b2u[b]) for b in raw]
    assert None not in ids and len(set(ids[:256])) == 256  # every byte is a token (the initial alphabet)
    u2b = {c: b for b, c in b2u.items()}
    assert bytes(u2b[c] for i in ids for c in tok._tok.id_to_token(i)) == raw


def test_harness_tokens_are_reserved_single_ids(stdlib_bpe):
    model, out, _ = stdlib_bpe
    tok = tk.make_tokenizer("bpe", out)
    assert tok.vocab_size == 512 == model.get_vocab_size()  # nothing appended: the file holds every harness token
    for i, name in enumerate(tk.HARNESS_SPECIAL_TOKENS):
        assert tok.special_id(name) == i and tok.encode(name, allow_special=True) == [i]
        assert i not in tok.encode(name) and len(tok.encode(name)) > 1  # plain text spelling it is never the marker
    assert (tok.bos_id, tok.eos_id, tok.pad_id) == (0, 1, 2) and get_chat_format(tok).name == "project"


def test_reload_through_the_hf_path_gives_the_trained_ids(stdlib_bpe):
    model, out, texts = stdlib_bpe
    samples = [texts[1][:20_000], texts[-1][:20_000], "naïve 🐍 x\u0301 中文\n\t  end"]
    for name in ("hf", "auto", "bpe"):
        tok = tk.make_tokenizer(name, out)
        assert isinstance(tok, tk.HFTokenizer)
        for text in samples:
            assert tok.encode(text) == model.encode(text, add_special_tokens=False).ids


def test_transformers_auto_tokenizer_agrees(stdlib_bpe):
    transformers = pytest.importorskip("transformers")
    _, out, texts = stdlib_bpe
    tok = tk.make_tokenizer("bpe", out)
    auto = transformers.AutoTokenizer.from_pretrained(out)
    assert (auto.bos_token_id, auto.eos_token_id, auto.pad_token_id) == (tok.bos_id, tok.eos_id, tok.pad_id)
    assert [auto.convert_tokens_to_ids(t) for t in tk.HARNESS_SPECIAL_TOKENS] == list(range(11))
    assert set(tk.HARNESS_SPECIAL_TOKENS) <= set(auto.all_special_tokens)
    chat = f"{tk.IM_USER}user{tk.IM_MIDDLE}fix it{tk.IM_END}{tk.IM_ASSISTANT}assistant{tk.IM_MIDDLE}ok 🐍{tk.IM_END}"
    for text in (texts[2][:20_000], "naïve 中文 x\u0301\n", chat):
        ids = auto.encode(text, add_special_tokens=False)  # transformers maps marker strings to their ids
        assert ids == tok.encode(text, allow_special=True)
        assert auto.decode(ids) == tok.decode(ids) == text


def test_training_is_deterministic(tmp_path):
    texts = _stdlib_texts(100_000)
    a, b = bpe.train_bpe(texts, 400, str(tmp_path / "a")), bpe.train_bpe(texts, 400, str(tmp_path / "b"))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert tk.make_tokenizer("bpe", a).vocab_size == 400 == tk.make_tokenizer("bpe", b).vocab_size


def test_the_vocabulary_is_sized_for_the_preset(tmp_path, capsys):
    assert bpe.preset_vocab_size("toy") == 512 and bpe.preset_vocab_size("deepseek_v3", 4096) == 4096
    with pytest.raises(ValueError, match=r"vocab_size=1000 does not fit preset 'toy': its model.vocab_size is 512"):
        bpe.preset_vocab_size("toy", 1000)
    with pytest.raises(ValueError, match="vocab_size=1000 does not fit preset 'toy'"):
        bpe.main(["--out", str(tmp_path / "x"), "--vocab_size", "1000", "--limit", "1"])
    assert not (tmp_path / "x").exists()  # refused before training
    line = bpe.main(["--out", str(tmp_path / "tok"), "--corpus", "stdlib", "--limit", "4"])
    assert json.loads(capsys.readouterr().out) == line
    assert line["vocab_size"] == 512 and line["preset"] == "toy" and line["bytes_per_token"] > 1.5


def test_a_missing_harness_token_is_named(tmp_path):
    out = bpe.train_bpe(TEXTS, 300, str(tmp_path), reserved=[t for t in bpe.RESERVED if t != tk.IM_END])
    assert tk.make_tokenizer("hf", out).special_id(tk.IM_END) == 300  # the hf loader appends it after the 300 ids
    with pytest.raises(ValueError, match=r"does not define the special token '<\|im_end\|>'"):
        tk.make_tokenizer("bpe", out)
    with pytest.raises(ValueError, match="tokenizer 'bpe' needs path=.*composer2_jax.data.bpe"):
        tk.TokenizerConfig("bpe").build()


# ---------------------------------------------------------------- bytes per token (the table bits per byte divides by)


def _gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> character table (openai/gpt-2 encoder.py), written out independently of the code under test."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def test_byte_lengths_of_a_trained_bpe(stdlib_bpe):
    model, out, texts = stdlib_bpe
    tok = tk.make_tokenizer("bpe", out)
    table = tok.byte_lengths()
    assert table.shape == (512,) and not table[:11].any()  # special tokens: 0 bytes
    u2b = {c: b for b, c in _gpt2_bytes_to_unicode().items()}
    expect = [len(bytes(u2b[c] for c in model.id_to_token(i))) for i in range(11, 512)]
    assert table[11:].tolist() == expect and table[11:].min() >= 1
    for text in (texts[3], "naïve 中文 🐍 x\u0301"):  # the per-id lengths add up to the text's bytes
        assert int(table[tok.encode(text)].sum()) == len(text.encode())


def test_byte_lengths_of_bytes_and_tiktoken():
    byte = tk.ByteTokenizer()
    assert byte.byte_lengths().tolist() == [1] * 256 + [0] * (byte.vocab_size - 256)
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"de": 256, b"def": 257, "中".encode(): 258})
    tok = tk.TiktokenTokenizer(ranks, {"[B]": 259, "[E]": 260, "[P]": 262}, bos="[B]", eos="[E]", pad="[P]")
    assert tok.byte_lengths().tolist() == [1] * 256 + [2, 3, 3, 0, 0, 0, 0]  # id 261 is no token: 0


def test_a_stage_selects_the_bpe_with_its_tokenizer_keys(stdlib_bpe):
    from composer2_jax.train.loop import stage_config
    from experiments import cpt_bulk, sft

    assert cpt_bulk.get_config("toy").tokenizer.name == "byte" == sft.get_config("toy").tokenizer.name  # default kept
    c = cpt_bulk.get_config("toy")
    c.tokenizer.name, c.tokenizer.path = "bpe", stdlib_bpe[1]
    run = stage_config(c)
    tok = run.tokenizer.build()
    assert isinstance(tok, tk.HFTokenizer) and tok.vocab_size == run.model.vocab_size == 512
    tk.check_vocab(tok, run.model.vocab_size)


def test_byte_lengths_of_a_sentencepiece_style_tokenizer_json(tmp_path):
    """Not byte-level (Llama-style: `▁` for a space, `<0xNN>` byte fallback): each id's bytes as it decodes in text."""
    from tokenizers import Tokenizer, decoders, models

    vocab = {"<unk>": 0, "<0xE4>": 1, "<0xB8>": 2, "<0xAD>": 3, "a": 4, "▁the": 5, "é": 6, "<s>": 7, "</s>": 8}
    hf = Tokenizer(models.BPE(vocab, [], unk_token="<unk>", byte_fallback=True))
    hf.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    hf.add_special_tokens(["<s>", "</s>"])
    hf.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    tok = tk.make_tokenizer("hf", str(tmp_path))
    table = tok.byte_lengths()
    assert table[:9].tolist() == [5, 1, 1, 1, 1, 4, 2, 0, 0]  # <unk> is an ordinary token spelled "<unk>" here
    assert tok.decode([5, 1, 2, 3, 6]).encode() == " the中é".encode() and table[[5, 1, 2, 3, 6]].sum() == 9


def test_the_small_preset_trains_its_own_bpe_once_at_its_default_path(tmp_path, monkeypatch):
    from composer2_jax.rl.orchestrator import check_shapes, rl_config
    from experiments import base
    from experiments import rl as rl_exp

    monkeypatch.chdir(tmp_path)
    stdlib = bpe.corpus_texts
    monkeypatch.setattr(bpe, "corpus_texts", lambda paths, field="text", limit=0: stdlib(paths, field, 60))
    cfg = base.base_stage("small").tokenizer
    assert cfg == tk.TokenizerConfig("bpe", "runs/small/tokenizer")
    with pytest.raises((OSError, ValueError)):
        cfg.build()  # nothing there yet: the loader's own error
    base.ensure_tokenizer(tk.TokenizerConfig("bpe", "mine"), "small")  # a path named by flag is never trained over
    base.ensure_tokenizer(base.base_stage("toy").tokenizer, "toy")  # bytes: nothing to train
    assert not (tmp_path / "mine").exists() and not (tmp_path / "runs").exists()
    base.ensure_tokenizer(cfg, "small")
    tok = cfg.build()
    assert 300 < tok.vocab_size <= 2048 and get_chat_format(tok).name == "project"
    written = (tmp_path / "runs/small/tokenizer/tokenizer.json").stat().st_mtime_ns
    base.ensure_tokenizer(cfg, "small")  # once: a second call finds it
    assert (tmp_path / "runs/small/tokenizer/tokenizer.json").stat().st_mtime_ns == written
    assert sorted(p.name for p in (tmp_path / "runs/small").iterdir()) == ["tokenizer"]  # no partial dir left
    run = rl_config(rl_exp.get_config("small"))
    check_shapes(run.harness, run.rollout, run.trainer.seq_len, tok)  # its pkg shapes hold with its own tokenizer
