"""A byte-level BPE trained on the corpus with `tokenizers` (data/bpe.py) loads as any model's tokenizer does."""

import json

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
