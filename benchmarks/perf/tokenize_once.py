"""Tokenize-once cache: tokenizing the stdlib corpus vs reading its cached ids, JSON lines.

    python -m benchmarks.perf.tokenize_once [--bpe_vocab 32768] [--batches 200] [--seq_len 2048] [--batch_size 8]

For each tokenizer — the byte tokenizer, and a byte-level BPE (tiktoken, Kimi's pre-tokenizer regex) whose merges
are learnt here from the first 8 MB of the corpus with HF `tokenizers` (skipped when it is not installed) — over the
whole stdlib corpus (every *.py of this interpreter's standard library, one document per file):
    tokenize_s      read + tokenize every document (`pipeline.document_ids`, what a run without the cache does)
    build_s         the cold cache: the same tokenization plus writing the ArrayRecord shards (once per key)
    cached_read_s   read + decode every document's ids from the warm cache (what later runs do instead)
    speedup         tokenize_s / cached_read_s
    pipeline_off / pipeline_warm   packed tokens/s of `make_dataset` for `--batches` batches without the cache and
                    with the warm one (same batches; one background prefetch thread, no reader threads)
"""

import argparse
import importlib.util
import json
import os
import tempfile
import time

import numpy as np

from composer2_jax.data import pipeline as P
from composer2_jax.data import sources as S
from composer2_jax.data import token_cache as TC
from composer2_jax.data import tokenizer as tk


def train_bpe(src, vocab: int, train_bytes: int = 8 << 20) -> tk.TiktokenTokenizer:
    """A byte-level BPE learnt from the first `train_bytes` of `src` (HF tokenizers), as a TiktokenTokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    texts, size = [], 0
    for i in range(len(src)):
        texts.append(src[i]["text"])
        size += len(texts[-1])
        if size >= train_bytes:
            break
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel
                                                      .alphabet(), show_progress=False))
    byte_of = {c: b for b, c in _bytes_to_unicode().items()}
    ranks = {bytes(byte_of[c] for c in tok): i for tok, i in hf.get_vocab().items()}
    order = sorted(ranks, key=ranks.get)  # dense 0..n-1 in merge order (the 256 bytes first)
    ranks = {t: i for i, t in enumerate(order)}
    names = (tk.BOS, tk.EOS, tk.PAD) + tk.CHAT_SPECIAL_TOKENS
    specials = {name: len(ranks) + i for i, name in enumerate(names)}
    return tk.TiktokenTokenizer(ranks, specials, bos=tk.BOS, eos=tk.EOS, pad=tk.PAD, name="stdlib-bpe")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (HF ByteLevel's alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def pipeline_tokens_per_s(cfg: P.DataConfig, tok, batches: int) -> float:
    it = iter(P.make_dataset(cfg, tok))
    next(it)
    t, real = time.perf_counter(), 0
    for _ in range(batches):
        real += int((next(it)["segment_ids"] > 0).sum())
    return real / (time.perf_counter() - t)


def measure(name: str, tok, root: str, args) -> dict:
    spec = S.SourceConfig()  # the stdlib corpus
    cfg = P.DataConfig(seq_len=args.seq_len, batch_size=args.batch_size, prefetch_batches=1)
    src = S.make_source(spec)
    encode = P._DocumentIds(tok, cfg)
    t = time.perf_counter()
    tokens = sum(len(encode(src[i])[0]) for i in range(len(src)))
    tokenize_s = time.perf_counter() - t
    t = time.perf_counter()
    cached, built = TC.open_or_build(spec, root, tok, encode, {"add_bos": cfg.add_bos, "add_eos": cfg.add_eos})
    build_s = time.perf_counter() - t
    assert built
    t = time.perf_counter()
    cached_tokens = sum(len(cached[i]["ids"]) for i in range(len(cached)))
    read_s = time.perf_counter() - t
    assert cached_tokens == tokens
    for i in (0, len(src) // 2, len(src) - 1):  # the cache holds exactly what tokenizing gives
        np.testing.assert_array_equal(cached[i]["ids"], encode(src[i])[0])
    off = pipeline_tokens_per_s(cfg, tok, args.batches)
    warm = pipeline_tokens_per_s(P.DataConfig(**{**cfg.__dict__, "token_cache": root}), tok, args.batches)
    size = sum(os.path.getsize(os.path.join(cached.path, f)) for f in os.listdir(cached.path))
    return {"tokenizer": name, "documents": len(src), "tokens": tokens, "corpus_mb": round(sum(
        len(src[i]["text"].encode()) for i in range(len(src))) / 1e6, 1), "cache_mb": round(size / 1e6, 1),
        "tokenize_s": round(tokenize_s, 3), "build_s": round(build_s, 3), "cached_read_s": round(read_s, 3),
        "speedup": round(tokenize_s / read_s, 2), "pipeline_off_tokens_per_s": round(off),
        "pipeline_warm_tokens_per_s": round(warm), "pipeline_speedup": round(warm / off, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bpe_vocab", type=int, default=32768)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--seq_len", type=int, default=2048)
    ap.add_argument("--batch_size", type=int, default=8)
    args = ap.parse_args()
    makers = [("byte", tk.ByteTokenizer)]
    if importlib.util.find_spec("tokenizers"):
        makers.append((f"bpe{args.bpe_vocab}", lambda: train_bpe(S.stdlib_source(), args.bpe_vocab)))
    else:
        print(json.dumps({"tokenizer": "bpe", "skipped": "HF tokenizers is not installed"}), flush=True)
    for name, make in makers:
        with tempfile.TemporaryDirectory() as root:
            print(json.dumps(measure(name, make(), root, args)), flush=True)


if __name__ == "__main__":
    main()
