"""Copying from an observation, probed directly: teacher-forced next-token accuracy at the tokens an assistant turn
carries over from an earlier tool observation.

An agent that fixes the `pkg` family (rl/pkg_tasks.py) must read the failing modules' names off a test run
(`FAIL Zebra`) and write them into its next call (`read_file Zebra.py`). Pass rates mix that skill with every other
one; this probe isolates it. On a transcript (chat messages, as the warm start trains on them), a **copied word** is
an identifier (`[A-Za-z_][A-Za-z0-9_]*`) whose first mention by the assistant comes after it appeared in a tool
message and before it appeared anywhere else (system, user, the tool schemas or an earlier assistant message):
nothing but the observation could have told the model that word. The probe renders the transcript exactly as the
warm start does (`data.chat.render_chat`), runs the model once over it, and scores the argmax prediction at every
token of a copied word (`token_accuracy`), and whole words (`word_accuracy`: every token right). For reference it
also scores every assistant token (`assistant_accuracy`, the SFT metric). `score(..., words=)` restricts the copied
words to a family's own vocabulary (the pkg module names), where the general rule also counts e.g. an operator's
operands.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import render_chat

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PAD_MULTIPLE = 64  # rows are padded to a multiple of this (fewer distinct compiled shapes)


@dataclasses.dataclass(frozen=True)
class ProbeRow:
    """One rendered transcript: token ids, the assistant mask, and each copied word's token positions."""

    ids: list[int]
    loss_mask: list[int]
    copied: list[tuple[str, list[int]]]  # (word, positions of the tokens that spell it)


def _identifiers(text: str) -> set[str]:
    """The identifiers in a text."""
    return set(IDENTIFIER.findall(text))


def _token_offsets(ids: Sequence[int], tokenizer: tk.Tokenizer) -> tuple[str, list[int]]:
    """The text of `ids` decoded token by token, and each token's start offset in it."""
    starts, text = [], ""
    for i in ids:
        starts.append(len(text))
        text += tokenizer.decode([i])
    return text, starts


def probe_row(messages: Sequence[Mapping[str, Any]], tokenizer: tk.Tokenizer,
              tools: Optional[Sequence[Mapping]] = None) -> ProbeRow:
    """Render a transcript and find its copied words (module docstring)."""
    full = render_chat(messages, tokenizer, tools=tools)
    seen_elsewhere = _identifiers(str(list(tools))) if tools else set()
    seen_in_tools: set[str] = set()
    copied: list[tuple[str, list[int]]] = []
    start = len(render_chat([], tokenizer, tools=tools).ids)
    for i, msg in enumerate(messages):
        prefix = render_chat(messages[:i + 1], tokenizer, tools=tools).ids
        end = len(prefix)
        if full.ids[:end] != prefix:
            raise ValueError(f"message {i}: the chat format does not render a conversation's prefix as a prefix of "
                             "the whole; the probe needs it to find each message's tokens")
        text, starts = _token_offsets(full.ids[start:end], tokenizer)
        if msg["role"] == "tool":
            seen_in_tools |= _identifiers(text)
        elif msg["role"] == "assistant":
            for m in IDENTIFIER.finditer(text):
                w = m.group()
                if w in seen_in_tools and w not in seen_elsewhere:
                    pos = [start + k for k, s in enumerate(starts)
                           if s < m.end() and (k + 1 == len(starts) or starts[k + 1] > m.start())]
                    copied.append((w, [p for p in pos if full.loss_mask[p]]))
                seen_elsewhere.add(w)
        else:
            seen_elsewhere |= _identifiers(text)
        start = end
    return ProbeRow(full.ids, full.loss_mask, [(w, p) for w, p in copied if p])


def predictions(apply_logits, rows: Sequence[ProbeRow], batch: int = 8) -> list[np.ndarray]:
    """Argmax next-token predictions of each row: `apply_logits(tokens [B, T] int32) -> logits [B, T, V]`; rows are
    right-padded to a multiple of PAD_MULTIPLE (causal: padding never changes an earlier position's logits)."""
    out: list[np.ndarray] = []
    for k in range(0, len(rows), batch):
        chunk = rows[k:k + batch]
        t = -(-max(len(r.ids) for r in chunk) // PAD_MULTIPLE) * PAD_MULTIPLE
        toks = np.zeros((len(chunk), t), np.int32)
        for j, r in enumerate(chunk):
            toks[j, :len(r.ids)] = r.ids
        pred = np.asarray(apply_logits(toks)).argmax(-1)
        out += [pred[j, :len(r.ids)] for j, r in enumerate(chunk)]
    return out


def score(rows: Sequence[ProbeRow], preds: Sequence[np.ndarray], words: Optional[Iterable[str]] = None
          ) -> dict[str, float]:
    """token_accuracy / word_accuracy over copied words (only those in `words`, when given), assistant_accuracy
    over assistant tokens (a token at position p is right when the prediction at p − 1 equals it), with counts.
    `word_accuracy_by_order[k]` is the word accuracy of each transcript's (k+1)-th counted word alone (the pkg
    family: the first failing module read, the second, …), `words_by_order[k]` how many there were."""
    allowed = None if words is None else set(words)
    tok_right = tok_n = word_right = word_n = asst_right = asst_n = 0
    by_order: list[list[int]] = []  # [right, n] of the k-th counted word of a transcript
    for r, pred in zip(rows, preds):
        ids = np.asarray(r.ids)
        right = np.zeros(len(ids), bool)
        right[1:] = pred[:-1] == ids[1:]
        mask = np.asarray(r.loss_mask, bool)
        mask[0] = False
        asst_right += int(right[mask].sum())
        asst_n += int(mask.sum())
        counted = [(w, pos) for w, pos in r.copied if allowed is None or w in allowed]
        for k, (w, pos) in enumerate(counted):
            hits = right[pos]
            tok_right += int(hits.sum())
            tok_n += len(pos)
            word_right += int(hits.all())
            word_n += 1
            if k == len(by_order):
                by_order.append([0, 0])
            by_order[k][0] += int(hits.all())
            by_order[k][1] += 1
    ratio = lambda a, b: a / b if b else float("nan")  # noqa: E731
    return {"token_accuracy": ratio(tok_right, tok_n), "word_accuracy": ratio(word_right, word_n),
            "assistant_accuracy": ratio(asst_right, asst_n), "copied_tokens": tok_n, "copied_words": word_n,
            "assistant_tokens": asst_n, "transcripts": len(rows),
            "word_accuracy_by_order": [ratio(a, b) for a, b in by_order], "words_by_order": [b for _, b in by_order]}


def model_logits_fn(cfg, params, router_state):
    """`tokens -> logits` of a checkpoint's model (one jit per padded shape)."""
    import jax

    from composer2_jax.model import Transformer

    model = Transformer(cfg)
    fn = jax.jit(lambda p, rs, toks: model.apply({"params": p, "router_state": rs}, toks).logits)
    return lambda toks: fn(params, router_state, toks)


def probe_checkpoint(checkpoint_dir: str, transcripts: Sequence[Mapping[str, Any]],
                     words: Optional[Iterable[str]] = None, tokenizer: Optional[tk.Tokenizer] = None) -> dict:
    """The probe on the newest weights of a checkpoint folder, over transcript records ({"messages", "tools"?}):
    {"version", "copied": every copied word, "words": only `words` (when given)}; the tokenizer defaults to the
    checkpoint's own."""
    from composer2_jax.bench.engine_policy import checkpoint_tokenizer, load_checkpoint

    engine, saved = load_checkpoint(checkpoint_dir)
    tok = tokenizer or checkpoint_tokenizer(saved)
    rows = [probe_row(t["messages"], tok, t.get("tools")) for t in transcripts]
    preds = predictions(model_logits_fn(engine.cfg, engine.params, engine.router_state), rows)
    out = {"version": engine.version, "copied": score(rows, preds)}
    if words is not None:
        out["words"] = score(rows, preds, words)
    return out
