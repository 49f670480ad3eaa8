"""`python -m composer2_jax.bench export ...`: self-contained task folders for Harbor (bench/export.py)."""

import sys

COMMANDS = ("export",)

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python -m composer2_jax.bench {{{','.join(COMMANDS)}}} ...; got {sys.argv[1:2] or 'nothing'}")
    from composer2_jax.bench.export import main

    sys.exit(main(sys.argv[2:]))
