"""Per-token log-probabilities of token sequences under a converted checkpoint, printed as JSON lines.

  python -m composer2_jax.score --checkpoint /ckpt/k25 --input seqs.jsonl > scores.jsonl
  python -m composer2_jax.score --checkpoint /ckpt/toy --input notes.txt --tokenizer bytes

Input: JSONL with one {"tokens": [int, ...]} per line, or (with `--tokenizer bytes`) plain text lines whose UTF-8
bytes are the token ids (the vocabulary must cover 0..255). Output, one line per input line:
  {"tokens": [...], "logprobs": [null, lp_1, ..., lp_{T-1}], "sum": Σ_t lp_t}   with lp_t = log p(x_t | x_<t)
computed in fp32 from the model's logits (log_softmax). Sequences are right-padded to a power-of-two bucket,
which causal attention and per-token routing leave without effect on the real positions.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Iterable, Iterator, Optional

import jax
import jax.numpy as jnp
import numpy as np

TOKENIZERS = ("none", "bytes")


def read_sequences(lines: Iterable[str], tokenizer: str = "none") -> Iterator[list[int]]:
    """Token id lists from JSONL {"tokens": [...]} lines, or byte ids of text lines (tokenizer='bytes')."""
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if tokenizer == "bytes":
            yield list(line.encode("utf-8"))
            continue
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            tokens = row["tokens"]
        except (json.JSONDecodeError, TypeError, KeyError) as e:
            raise ValueError(f"input line {n}: expected a JSON object with a 'tokens' list "
                             f"(or pass --tokenizer bytes for text lines): {e}") from None
        if not all(isinstance(t, int) for t in tokens):
            raise ValueError(f"input line {n}: 'tokens' must be a list of ints")
        yield tokens


def token_logprobs(logits_BTV, tokens_BT):
    """lp[b, t] = log softmax(logits[b, t-1])[tokens[b, t]] for t ≥ 1: [B, T-1] fp32."""
    logp = jax.nn.log_softmax(logits_BTV[:, :-1].astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(logp, tokens_BT[:, 1:, None], axis=-1)[..., 0]


def _bucket(n: int, cap: int) -> int:
    return min(max(8, 1 << (n - 1).bit_length()), cap)


class Scorer:
    """Scores token sequences with a model; one compiled program per (batch, bucket length)."""

    def __init__(self, cfg, params: dict, router_state: dict):
        from composer2_jax.model.transformer import Transformer

        self.cfg = cfg
        variables = {"params": {k: v for k, v in params.items() if k != "mtp"}}
        if router_state:
            variables["router_state"] = {k: v for k, v in router_state.items() if k != "mtp"}
        self.variables = jax.tree.map(jnp.asarray, variables)
        model = Transformer(cfg)
        self._fn = jax.jit(lambda v, t: token_logprobs(model.apply(v, t).logits, t))

    def __call__(self, seqs: list[list[int]]) -> list[list[Optional[float]]]:
        c = self.cfg
        for s in seqs:
            if len(s) > c.max_position_embeddings:
                raise ValueError(f"sequence of {len(s)} tokens exceeds "
                                 f"max_position_embeddings={c.max_position_embeddings}")
            bad = [t for t in s if not 0 <= t < c.vocab_size]
            if bad:
                raise ValueError(f"token ids {bad[:5]} are outside the vocabulary [0, {c.vocab_size})")
        t = _bucket(max(len(s) for s in seqs), c.max_position_embeddings)
        tokens = np.zeros((len(seqs), t), np.int32)
        for i, s in enumerate(seqs):
            tokens[i, :len(s)] = s
        lp = np.asarray(self._fn(self.variables, jnp.asarray(tokens)))
        return [([None] + lp[i, :len(s) - 1].tolist()) if s else [] for i, s in enumerate(seqs)]


def score_lines(scorer: Scorer, seqs: Iterable[list[int]], batch_size: int = 8) -> Iterator[dict]:
    """Output records in input order, scoring `batch_size` sequences at a time."""
    batch: list[list[int]] = []

    def flush():
        for s, lp in zip(batch, scorer(batch), strict=True):
            yield {"tokens": s, "logprobs": lp, "sum": float(sum(x for x in lp if x is not None))}
        batch.clear()

    for s in seqs:
        batch.append(s)
        if len(batch) == batch_size:
            yield from flush()
    if batch:
        yield from flush()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m composer2_jax.score", description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True, help="converted checkpoint (python -m composer2_jax.convert import)")
    p.add_argument("--input", required=True, help="JSONL of {'tokens': [...]} or, with --tokenizer bytes, text lines")
    p.add_argument("--tokenizer", choices=TOKENIZERS, default="none", help="bytes: ids = UTF-8 bytes of each line")
    p.add_argument("--output", default="-", help="output JSONL path (default stdout)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="compute dtype")
    p.add_argument("--batch-size", type=int, default=8)
    args = p.parse_args(argv)

    from composer2_jax.convert.checkpoint import restore_checkpoint

    cfg, params, state = restore_checkpoint(args.checkpoint, dtype=args.dtype, remat_policy="none")
    if args.tokenizer == "bytes" and cfg.vocab_size < 256:
        raise SystemExit(f"--tokenizer bytes needs a vocabulary of at least 256 ids; the model has {cfg.vocab_size}")
    scorer = Scorer(cfg, params, state)
    out = sys.stdout if args.output == "-" else open(args.output, "w")
    try:
        with open(args.input, encoding="utf-8") as f:
            for rec in score_lines(scorer, read_sequences(f, args.tokenizer), args.batch_size):
                out.write(json.dumps(rec) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    main()
