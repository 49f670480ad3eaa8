"""Command line: `python -m composer2_jax.convert {import,export} ...` (see composer2_jax/convert/README.md).

  python -m composer2_jax.convert import --hf /data/Kimi-K2.5 --out /ckpt/k25 [--no-scan] [--dtype auto]
  python -m composer2_jax.convert export --ckpt /ckpt/k25 --out /data/k25-hf [--dtype bfloat16]
  python -m composer2_jax.convert export --ckpt runs/k25/cpt_long [--step 2000] --out /data/k25-long-hf
"""

from __future__ import annotations

import argparse
import logging
import time

from composer2_jax.convert.exporter import DEFAULT_SHARD_BYTES, EXPORT_DTYPES, export_hf
from composer2_jax.convert.hf_source import CheckpointError
from composer2_jax.convert.importer import IMPORT_DTYPES, import_hf


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m composer2_jax.convert", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("import", help="HF safetensors directory -> converted (orbax) checkpoint")
    i.add_argument("--hf", required=True, help="HF checkpoint directory (config.json + *.safetensors)")
    i.add_argument("--out", required=True, help="converted checkpoint directory to create")
    i.add_argument("--scan", action=argparse.BooleanOptionalAction, default=True,
                   help="record scan_layers=True (stacked units) or False in the model config")
    i.add_argument("--dtype", choices=IMPORT_DTYPES, default="auto",
                   help="auto: keep stored float dtypes, dequantize FP8/int4 to float32")
    i.add_argument("--skip-mtp", action="store_true", help="do not import the MTP layers")
    i.add_argument("--overwrite", action="store_true")
    e = sub.add_parser("export", help="converted or training-stage checkpoint -> HF safetensors directory")
    e.add_argument("--ckpt", required=True,
                   help="a converted checkpoint, or a stage's workdir, its checkpoints/ directory or one step "
                        "directory (cpt_bulk, cpt_long, sft, rl)")
    e.add_argument("--step", type=int, default=None,
                   help="stage checkpoints: the committed step to export (default: the newest)")
    e.add_argument("--tokenizer", default=None,
                   help="directory to copy tokenizer files from (default: the stage's recorded tokenizer.path)")
    e.add_argument("--out", required=True, help="HF directory to write (via OUT.partial, renamed when complete)")
    e.add_argument("--dtype", choices=EXPORT_DTYPES, default="auto",
                   help="auto: the dtypes of the imported source (a stage: its stored master-weight dtypes)")
    e.add_argument("--max-shard-gb", type=float, default=DEFAULT_SHARD_BYTES / 2**30)
    e.add_argument("--overwrite", action="store_true")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    t0 = time.time()
    if args.cmd == "import":
        path = import_hf(args.hf, args.out, scan_layers=args.scan, dtype=args.dtype, skip_mtp=args.skip_mtp,
                         overwrite=args.overwrite)
    else:
        try:
            path = export_hf(args.ckpt, args.out, dtype=args.dtype, max_shard_bytes=int(args.max_shard_gb * 2**30),
                             overwrite=args.overwrite, step=args.step, tokenizer=args.tokenizer)
        except (CheckpointError, FileNotFoundError, FileExistsError) as e:  # bad input: one line naming it
            raise SystemExit(f"export: {type(e).__name__}: {e}") from None
    logging.info("%s -> %s in %.1f s", args.cmd, path, time.time() - t0)


if __name__ == "__main__":
    main()
