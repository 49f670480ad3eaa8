"""Shared command-line entry for experiment files: `--config=FILE:PRESET` plus `--config.key=value` overrides."""

from __future__ import annotations

import json
import logging
import sys

from absl import app, flags
from absl import logging as absl_logging
from ml_collections import config_flags


def run(experiment_file: str, default_preset: str, prepare=None):
    """Parse flags for the experiment and train it (after `prepare(config)`, e.g. writing generated data)."""
    config_flags.DEFINE_config_file("config", f"{experiment_file}:{default_preset}", "experiment config",
                                    lock_config=True)

    def main(argv):
        del argv
        from composer2_jax.train import distributed
        from composer2_jax.train.loop import train

        distributed.initialize()
        quiet_logs()
        if prepare is not None:
            prepare(flags.FLAGS.config)
        result = train(flags.FLAGS.config)
        print(json.dumps(dict(stage=flags.FLAGS.config.workdir, final_step=result.final_step,
                              first_loss=result.losses[0] if result.losses else None,
                              last_loss=result.losses[-1] if result.losses else None,
                              tokens_per_s=round(result.tokens_per_s, 1), seconds=round(result.seconds, 1))))

    app.run(main, argv=sys.argv)


def quiet_logs():
    """INFO for this package, WARNING for the libraries (orbax logs every file it writes)."""
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("composer2_jax").setLevel(logging.INFO)
