"""A byte-level BPE tokenizer trained on a corpus with the `tokenizers` library, saved as an HF tokenizer directory.

    python -m composer2_jax.data.bpe --out runs/bpe-toy                  (the stdlib; vocab = the toy model's 512 ids)
    python -m composer2_jax.data.bpe --out runs/bpe4k --preset gpu_small --vocab_size 4096
    python -m composer2_jax.data.bpe --out DIR --vocab_size 32768 --corpus data/*.jsonl --field text

The directory holds `tokenizer.json`, `tokenizer_config.json` and `special_tokens_map.json` (bos/eos/pad and every
reserved token marked special), so it loads through the same path as any model's own tokenizer
(data/tokenizer.HFTokenizer: `tokenizer.name=hf`, `auto`, or `bpe`, which also checks the reserved tokens) and with
`transformers.AutoTokenizer.from_pretrained(DIR)`. The reserved tokens are the harness's
(data/tokenizer.HARNESS_SPECIAL_TOKENS: bos, eos, pad and the chat template's markers) at ids 0.. in that order, so
the chat format is the project's (docs/tokenizers.md). Byte-level: every byte has a token (the initial alphabet), so
no text is out of vocabulary and any text round-trips. The vocabulary defaults to the preset's `model.vocab_size`
(the embedding rows); a larger one is refused. The same corpus and settings give the same file.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Iterable, Sequence

from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import get_chat_format

RESERVED = tk.HARNESS_SPECIAL_TOKENS


def train_bpe(texts: Iterable[str], vocab_size: int, out_dir: str, reserved: Sequence[str] = RESERVED,
              min_frequency: int = 2) -> str:
    """Train a byte-level BPE of `vocab_size` ids (reserved tokens included) on `texts`; write it to out_dir."""
    save_bpe(train_bpe_model(texts, vocab_size, reserved, min_frequency), out_dir, reserved)
    return out_dir


def train_bpe_model(texts: Iterable[str], vocab_size: int, reserved: Sequence[str] = RESERVED,
                    min_frequency: int = 2):
    """The trained `tokenizers.Tokenizer`: `reserved` at ids 0.., then the 256 byte tokens, then the merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    missing = [t for t in (tk.BOS, tk.EOS, tk.PAD) if t not in reserved]
    if missing:
        raise ValueError(f"reserved tokens {list(reserved)} lack {missing}; expected bos, eos and pad among them")
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(reserved):
        raise ValueError(f"vocab_size={vocab_size}; expected at least {len(alphabet) + len(reserved)} (the 256 byte "
                         f"tokens and {len(reserved)} reserved tokens)")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(reserved),
                                  initial_alphabet=alphabet, show_progress=False)
    bpe.train_from_iterator(texts, trainer)
    return bpe


def save_bpe(bpe, out_dir: str, reserved: Sequence[str] = RESERVED) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json (what HF loaders read) to out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    bpe.save(os.path.join(out_dir, "tokenizer.json"))
    decoder = {str(bpe.token_to_id(t)): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                                         "normalized": False, "single_word": False} for t in reserved}
    extra = [t for t in reserved if t not in (tk.BOS, tk.EOS, tk.PAD)]  # transformers' all_special_tokens list them
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": tk.BOS, "eos_token": tk.EOS,
              "pad_token": tk.PAD, "additional_special_tokens": extra, "added_tokens_decoder": decoder,
              "clean_up_tokenization_spaces": False, "model_max_length": 1 << 20}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": tk.BOS, "eos_token": tk.EOS, "pad_token": tk.PAD,
                   "additional_special_tokens": extra}, f, indent=1)


def preset_vocab_size(preset: str, vocab_size: int = 0) -> int:
    """The vocabulary to train for `preset`: `vocab_size`, or the model's `vocab_size` (its embedding rows) when 0;
    a ValueError when the model cannot hold it."""
    from composer2_jax.model_config import preset as model_preset

    rows = model_preset(preset).vocab_size
    if vocab_size > rows:
        raise ValueError(f"vocab_size={vocab_size} does not fit preset {preset!r}: its model.vocab_size is {rows} "
                         f"(embedding rows); expected vocab_size <= {rows}, or a preset with a larger model.vocab_size")
    return vocab_size or rows


def corpus_texts(paths: Sequence[str], field: str = "text", limit: int = 0) -> Iterable[str]:
    """Documents of a corpus: the stdlib (no paths, or "stdlib") or JSONL files / directories of .py files."""
    from composer2_jax.data import sources

    if not paths or list(paths) == ["stdlib"]:
        src = sources.stdlib_source()
    else:
        specs = [sources.SourceConfig(kind="directory", path=p) if os.path.isdir(p)
                 else sources.SourceConfig(kind="jsonl", path=p, field=field) for p in paths]
        srcs = [sources.make_source(s) for s in specs]
        src = [d for s in srcs for d in (s[i] for i in range(len(s)))]
    n = len(src) if not limit else min(limit, len(src))
    for i in range(n):
        yield src[i]["text"]


def bytes_per_token(tok: tk.Tokenizer, texts: Iterable[str]) -> float:
    """UTF-8 bytes per token of `tok` over `texts` (the compression the BPE buys over bytes)."""
    n_bytes = n_tokens = 0
    for text in texts:
        n_bytes += len(text.encode("utf-8"))
        n_tokens += len(tok.encode(text))
    return n_bytes / max(n_tokens, 1)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory to write tokenizer.json + tokenizer_config.json into")
    p.add_argument("--preset", default="toy", help="model preset whose model.vocab_size bounds (and defaults) the "
                                                   "vocabulary")
    p.add_argument("--vocab_size", "--vocab", type=int, default=0, help="ids in all, reserved tokens included "
                                                                        "(0 = the preset's model.vocab_size)")
    p.add_argument("--corpus", nargs="*", default=[], help="stdlib (the default: the Python standard library), or "
                                                           "JSONL files and directories of .py files")
    p.add_argument("--field", default="text", help="JSONL: the text field")
    p.add_argument("--limit", type=int, default=0, help="documents to train on (0 = all)")
    args = p.parse_args(argv)
    vocab = preset_vocab_size(args.preset, args.vocab_size)
    texts = list(corpus_texts(args.corpus, args.field, args.limit))
    t0 = time.time()
    out = train_bpe(texts, vocab, args.out)
    seconds = time.time() - t0
    tok = tk.make_tokenizer("bpe", out)
    tk.check_vocab(tok, preset_vocab_size(args.preset))
    line = {"out": out, "preset": args.preset, "vocab_size": tok.vocab_size, "documents": len(texts),
            "corpus_bytes": sum(len(t.encode("utf-8")) for t in texts), "train_seconds": round(seconds, 2),
            "bytes_per_token": round(bytes_per_token(tok, texts), 4), "chat_format": get_chat_format(tok).name}
    print(json.dumps(line))
    return line


if __name__ == "__main__":
    main()
