"""The copy probe (rl/copy_probe.py): which tokens count as copied from an observation, and its accuracies against
a naive per-row, per-position reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax.data import tokenizer as tk
from composer2_jax.model import Transformer
from composer2_jax.model_config import get_model_config
from composer2_jax.rl import copy_probe

TRANSCRIPT = [
    {"role": "system", "content": "Fix the bug."},
    {"role": "user", "content": "Run the tests and fix the failing functions."},
    {"role": "assistant", "content": "Running the tests.",
     "tool_calls": [{"name": "run_terminal_cmd", "arguments": {"command": "python3 -B test.py"}}]},
    {"role": "tool", "name": "run_terminal_cmd", "content": "exit code 1\nstdout:\nFAIL Zebra\nFAIL Lemon\n"},
    {"role": "assistant", "content": "Reading Zebra.py.",
     "tool_calls": [{"name": "read_file", "arguments": {"path": "Zebra.py"}}]},
    {"role": "tool", "name": "read_file", "content": "def f(a, b): return a - b\n"},
    {"role": "assistant", "content": "Reading Lemon.py.",
     "tool_calls": [{"name": "read_file", "arguments": {"path": "Lemon.py"}}]},
]


@pytest.fixture(scope="module")
def byte_tok():
    return tk.make_tokenizer("byte")


def _decode_span(tok, ids, positions):
    return tok.decode([ids[p] for p in positions])


def test_copied_words_are_first_mentions_of_observation_words(byte_tok):
    row = copy_probe.probe_row(TRANSCRIPT, byte_tok)
    words = [w for w, _ in row.copied]
    # Zebra and Lemon come only from the test run; the second Zebra (the path) repeats the assistant's own mention;
    # "Reading", "py", "read_file" were said by the assistant (or the system/user) before any tool did.
    assert words == ["Zebra", "Lemon"]
    for w, pos in row.copied:
        assert _decode_span(byte_tok, row.ids, pos) == w
        assert all(row.loss_mask[p] for p in pos)
        assert pos == list(range(pos[0], pos[0] + len(w)))  # bytes: one token per letter, contiguous


def test_words_filter_and_unfiltered_operands(byte_tok):
    more = TRANSCRIPT[:6] + [{"role": "assistant", "content": "a - b -> a + b.",
                              "tool_calls": [{"name": "edit_file", "arguments": {"path": "Zebra.py"}}]}]
    row = copy_probe.probe_row(more, byte_tok)
    assert [w for w, _ in row.copied] == ["Zebra", "a", "b"]
    preds = [np.zeros(len(row.ids), np.int64)]
    assert copy_probe.score([row], preds)["copied_words"] == 3
    assert copy_probe.score([row], preds, words={"Zebra", "Lemon"})["copied_words"] == 1


def test_a_word_the_user_said_is_not_copied(byte_tok):
    said = [dict(m) for m in TRANSCRIPT]
    said[1] = {"role": "user", "content": "Run the tests; Lemon is suspicious."}
    assert [w for w, _ in copy_probe.probe_row(said, byte_tok).copied] == ["Zebra"]


def test_bpe_copied_tokens_spell_the_word(tmp_path):
    pytest.importorskip("tokenizers")
    from composer2_jax.data import bpe

    bpe.train_bpe([m["content"] for m in TRANSCRIPT] * 50, 300, str(tmp_path))
    tok = tk.make_tokenizer("bpe", str(tmp_path))
    row = copy_probe.probe_row(TRANSCRIPT, tok)
    assert [w for w, _ in row.copied] == ["Zebra", "Lemon"]
    for w, pos in row.copied:
        assert _decode_span(tok, row.ids, pos).strip() == w


def test_accuracies_match_a_naive_reference(byte_tok):
    cfg = get_model_config("toy", num_mtp_layers=0)
    model = Transformer(cfg)
    variables = nn.unbox(model.init(jax.random.key(3), jnp.zeros((1, 8), jnp.int32)))
    params, rs = variables["params"], variables.get("router_state", {})
    rows = [copy_probe.probe_row(TRANSCRIPT[:k], byte_tok) for k in (5, 7)]
    got = copy_probe.score(rows, copy_probe.predictions(copy_probe.model_logits_fn(cfg, params, rs), rows, batch=2))

    apply = jax.jit(lambda toks: model.apply({"params": params, "router_state": rs}, toks).logits)
    tok_hits, words, asst_hits, asst_n = [], [], 0, 0  # one unpadded row at a time, position by position
    for r in rows:
        logits = np.asarray(apply(jnp.asarray([r.ids]))[0])
        ok = [False] + [int(np.argmax(logits[p - 1])) == r.ids[p] for p in range(1, len(r.ids))]
        asst_hits += sum(ok[p] for p in range(1, len(r.ids)) if r.loss_mask[p])
        asst_n += sum(r.loss_mask[1:])
        for _, pos in r.copied:
            tok_hits += [ok[p] for p in pos]
            words.append(all(ok[p] for p in pos))
    assert got["copied_tokens"] == len(tok_hits) == 2 * len("Zebra") + len("Lemon")
    assert got["copied_words"] == len(words) == 3
    assert got["token_accuracy"] == pytest.approx(sum(tok_hits) / len(tok_hits), abs=0)
    assert got["word_accuracy"] == pytest.approx(sum(words) / len(words), abs=0)
    assert got["assistant_accuracy"] == pytest.approx(asst_hits / asst_n, abs=0)
    assert got["transcripts"] == 2


def test_a_model_that_predicts_the_next_token_scores_one(byte_tok):
    rows = [copy_probe.probe_row(TRANSCRIPT, byte_tok)]

    def oracle(toks):  # logits whose argmax at p is the row's token at p + 1
        nxt = np.roll(toks, -1, axis=1)
        return np.eye(512, dtype=np.float32)[nxt]

    got = copy_probe.score(rows, copy_probe.predictions(oracle, rows))
    assert got["token_accuracy"] == got["word_accuracy"] == got["assistant_accuracy"] == 1.0

    def off_by_one(toks):
        return np.eye(512, dtype=np.float32)[toks]  # predicts the current token again

    assert copy_probe.score(rows, copy_probe.predictions(off_by_one, rows))["word_accuracy"] == 0.0


def test_word_accuracy_by_order_scores_each_transcripts_kth_word(byte_tok):
    """The first module read right and the second wrong: by order [1, 0]; the overall accuracy is their mean."""
    rows = [copy_probe.probe_row(TRANSCRIPT, byte_tok)] * 3
    lemon = [pos for w, pos in rows[0].copied if w == "Lemon"][0]

    def first_right(toks):
        nxt = np.roll(toks, -1, axis=1)
        nxt[:, [p - 1 for p in lemon]] = 0  # every prediction of Lemon's bytes is wrong
        return np.eye(512, dtype=np.float32)[nxt]

    got = copy_probe.score(rows, copy_probe.predictions(first_right, rows), words={"Zebra", "Lemon"})
    assert got["word_accuracy_by_order"] == [1.0, 0.0] and got["words_by_order"] == [3, 3]
    assert got["word_accuracy"] == 0.5
