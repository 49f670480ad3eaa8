"""A byte-level BPE tokenizer trained on a corpus with the `tokenizers` library, saved as an HF tokenizer directory.

    python -m composer2_jax.data.bpe --out runs/bpe4k --vocab 4096                 (the stdlib, the default corpus)
    python -m composer2_jax.data.bpe --out DIR --vocab 32768 --corpus data/*.jsonl --field text

The directory holds `tokenizer.json` and `tokenizer_config.json` (bos/eos/pad and every reserved token marked
special), so it loads through the same path as any model's own tokenizer (data/tokenizer.HFTokenizer,
`tokenizer.name=hf` or `auto`). The reserved tokens are the harness's: bos, eos, pad and the chat template's markers
(data/tokenizer.CHAT_SPECIAL_TOKENS), ids 0.. in that order, so the chat format is the project's (docs/tokenizers.md).
Byte-level: every byte has a token (the initial alphabet), so no text is out of vocabulary.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Iterable, Sequence

from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import get_chat_format

RESERVED = (tk.BOS, tk.EOS, tk.PAD) + tk.CHAT_SPECIAL_TOKENS


def train_bpe(texts: Iterable[str], vocab_size: int, out_dir: str, reserved: Sequence[str] = RESERVED,
              min_frequency: int = 2) -> str:
    """Train a byte-level BPE of `vocab_size` ids (reserved tokens included) on `texts`; write it to out_dir."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

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
    os.makedirs(out_dir, exist_ok=True)
    bpe.save(os.path.join(out_dir, "tokenizer.json"))
    decoder = {str(bpe.token_to_id(t)): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                                         "normalized": False, "single_word": False} for t in reserved}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": tk.BOS, "eos_token": tk.EOS,
              "pad_token": tk.PAD, "added_tokens_decoder": decoder, "clean_up_tokenization_spaces": False,
              "model_max_length": 1 << 20}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    return out_dir


def corpus_texts(paths: Sequence[str], field: str = "text", limit: int = 0) -> Iterable[str]:
    """Documents of a corpus: the stdlib (no paths) or JSONL files / directories of .py files."""
    from composer2_jax.data import sources

    if not paths:
        src = sources.stdlib_source()
    else:
        specs = [sources.SourceConfig(kind="directory", path=p) if os.path.isdir(p)
                 else sources.SourceConfig(kind="jsonl", path=p, field=field) for p in paths]
        srcs = [sources.make_source(s) for s in specs]
        src = [d for s in srcs for d in (s[i] for i in range(len(s)))]
    n = len(src) if not limit else min(limit, len(src))
    for i in range(n):
        yield src[i]["text"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory to write tokenizer.json + tokenizer_config.json into")
    p.add_argument("--vocab", type=int, default=4096, help="ids in all, reserved tokens included")
    p.add_argument("--corpus", nargs="*", default=[], help="JSONL files or directories of .py files (default: the "
                                                             "Python standard library)")
    p.add_argument("--field", default="text", help="JSONL: the text field")
    p.add_argument("--limit", type=int, default=0, help="documents to train on (0 = all)")
    args = p.parse_args(argv)
    out = train_bpe(corpus_texts(args.corpus, args.field, args.limit), args.vocab, args.out)
    tok = tk.make_tokenizer("hf", out)
    print(json.dumps({"out": out, "vocab_size": tok.vocab_size, "chat_format": get_chat_format(tok).name}))


if __name__ == "__main__":
    main()
