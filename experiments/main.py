"""Shared command-line entry for experiment files: `--config=FILE:PRESET` plus `--config.key=value` overrides.

    python -m experiments.cpt_bulk --config.optim.lr=1e-3      train with an override
    python -m experiments.cpt_bulk --describe                 print every key, its value and its comment
    python -m experiments.cpt_bulk --dry_run [--dry_run_chip=h200 --dry_run_chips=256]
                           compile the config as given on simulated devices, one JSON line (experiments/dry_run.py)

A flag that names no key is rejected before anything runs, naming the key, its section and the closest known keys;
a value out of range is rejected at the config boundary (the frozen dataclass), naming the value and what was
expected. Both exit with status 2.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from typing import Callable, Optional, Sequence

from absl import app, flags
from absl import logging as absl_logging

from composer2_jax import schema
from experiments import dry_run


def load_config(spec: str):
    """The ConfigDict of `FILE[:ARG]`: FILE's `get_config(ARG)` (or `get_config()` without ARG)."""
    path, _, arg = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location("_experiment_config", path)
    if module_spec is None or module_spec.loader is None:
        raise schema.ConfigError(f"--config={spec}: {path!r} is not a Python experiment file")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.get_config(arg) if arg else module.get_config()


def check_argv(argv: Sequence[str], default_spec: str) -> None:
    """ConfigError for an unknown `--config.*` key in argv (against the config that `--config=` selects)."""
    spec = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), default_spec)
    if any(a.startswith("--config.") for a in argv):
        schema.check_overrides(load_config(spec), argv)


def define_flags(experiment_file: str, default_preset: str) -> str:
    """Register --config (with overrides) and --describe; returns the default `FILE:PRESET`."""
    from ml_collections import config_flags  # the experiment CLI needs it, the library does not

    spec = f"{experiment_file}:{default_preset}"
    config_flags.DEFINE_config_file("config", spec, "experiment config", lock_config=True)
    flags.DEFINE_bool("describe", False, "print every config key with its value and comment, then exit")
    dry_run.define_flags()
    return spec


def freeze_or_exit(config, to_frozen: Callable):
    """`to_frozen(config)`; a ConfigError is printed (no traceback) and the process exits with status 2."""
    try:
        return to_frozen(config)
    except schema.ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def parse(experiment_file: str, default_preset: str, argv: Sequence[str], to_frozen: Callable):
    """Flags of an experiment → (the ConfigDict, its frozen form); handles --describe and bad keys/values."""
    try:  # before the flags are defined: config_flags reads the overrides from sys.argv when they are
        check_argv(argv, f"{experiment_file}:{default_preset}")
    except schema.ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    define_flags(experiment_file, default_preset)
    flags.FLAGS(list(argv))
    config = flags.FLAGS.config
    frozen = freeze_or_exit(config, to_frozen)
    if flags.FLAGS.describe:
        print("\n".join(schema.describe(frozen)))
        raise SystemExit(0)
    if not flags.FLAGS.dry_run:  # a preset whose BPE is trained here gets it on first use (experiments/base.py)
        from experiments.base import ensure_tokenizer

        ensure_tokenizer(frozen.tokenizer, frozen.preset)
    return config, frozen


def run(experiment_file: str, default_preset: str, prepare: Optional[Callable] = None):
    """Parse flags for a training stage and train it (after `prepare(config)`, e.g. writing generated data)."""
    from composer2_jax.train import distributed
    from composer2_jax.train.loop import stage_config, train

    config, frozen = parse(experiment_file, default_preset, sys.argv, stage_config)
    if flags.FLAGS.dry_run:  # compile the config as given on simulated devices; nothing trains (experiments/dry_run.py)
        from composer2_jax.plan.dry_run import stage_shape

        dry_run.run(config, lambda c: stage_shape(stage_config(c)), frozen.chip, config.mesh)
        return

    def main(argv):
        del argv
        distributed.initialize()
        quiet_logs()
        import jax  # after distributed.initialize

        freeze_or_exit(config, lambda c: stage_config(c).mesh.shape(jax.device_count()))  # mesh ≠ devices: exit 2
        if prepare is not None:
            prepare(config)
        result = train(config)
        print(json.dumps(dict(stage=config.workdir, final_step=result.final_step,
                              first_loss=result.losses[0] if result.losses else None,
                              last_loss=result.losses[-1] if result.losses else None,
                              tokens_per_s=round(result.tokens_per_s, 1), seconds=round(result.seconds, 1))))

    app.run(main, argv=[sys.argv[0]])


def quiet_logs():
    """INFO for this package, WARNING for the libraries (orbax logs every file it writes)."""
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("composer2_jax").setLevel(logging.INFO)
