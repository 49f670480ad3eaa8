"""Input-pipeline throughput: packed tokens per second (wall) and per CPU-second (≈ per core), JSON lines.

    python -m benchmarks.perf.input_pipeline [--batches 40] [--seq_len 2048] [--batch_size 8]

Byte tokenizer; one line per (corpus, threads) setting: the stdlib corpus (whole files, mean ~17 KB) and the same
text cut into 256-character documents (per-document overhead dominates), each inline, with background batch
prefetch (the default), and with two reader threads as well. A trainer needs tokens/s above its step's consumption rate.
"""

import argparse
import json
import time

from composer2_jax.data import pipeline as P
from composer2_jax.data import sources as S
from composer2_jax.data.tokenizer import ByteTokenizer


def short_documents(n: int = 20000, size: int = 256) -> S.SourceConfig:
    """The first stdlib files cut into `n` documents of `size` characters."""
    src, docs = S.stdlib_source(), []
    for i in range(len(src)):
        text = src[i]["text"]
        docs += [text[j:j + size] for j in range(0, len(text), size)]
        if len(docs) >= n:
            break
    return S.SourceConfig(kind="source", provider=S.InMemorySource(docs[:n], name="short"), name="short")


def measure(cfg: P.DataConfig, batches: int, corpus: str) -> dict:
    """Tokens/s of `batches` batches after two warm-up batches."""
    it = iter(P.make_dataset(cfg, ByteTokenizer()))
    for _ in range(2):
        next(it)
    wall, cpu = time.perf_counter(), time.process_time()
    real = 0
    for _ in range(batches):
        b = next(it)
        real += int((b["segment_ids"] > 0).sum())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    slots = batches * cfg.batch_size * cfg.seq_len
    return {"bench": "data_pipeline", "corpus": corpus, "tokenizer": "byte", "seq_len": cfg.seq_len,
            "batch_size": cfg.batch_size, "num_threads": cfg.num_threads, "prefetch_batches": cfg.prefetch_batches,
            "tokens_per_s": round(slots / wall), "tokens_per_cpu_s": round(slots / max(cpu, 1e-9)),
            "fill": round(real / slots, 4)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--seq_len", type=int, default=2048)
    ap.add_argument("--batch_size", type=int, default=8)
    a = ap.parse_args()
    for corpus, source in (("stdlib_files", S.SourceConfig()), ("stdlib_256_char_docs", short_documents())):
        for threads, prefetch in ((0, 0), (0, 2), (2, 2)):
            cfg = P.DataConfig(sources=(source,), seq_len=a.seq_len, batch_size=a.batch_size, num_threads=threads,
                               prefetch_batches=prefetch)
            print(json.dumps(measure(cfg, a.batches, corpus)), flush=True)


if __name__ == "__main__":
    main()
