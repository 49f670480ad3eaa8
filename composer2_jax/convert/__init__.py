"""HF safetensors ⇄ our parameter trees: config.json reader/writer, streaming import/export, dequantization.

Public API:
  read_hf_config / hf_model_config / write_hf_config   config.json ⇄ ModelConfig
  load_hf_checkpoint(dir) -> (ModelConfig, params, router_state)      in memory, straight from HF files
  import_hf(dir, out) / export_hf(ckpt, out)                          streaming, one layer group at a time;
                                                                      export_hf also reads a training stage's
                                                                      checkpoints (workdir, checkpoints/, step dir)
  restore_checkpoint(path) -> (ModelConfig, params, router_state)     a converted checkpoint
  save_checkpoint(path, cfg, params, router_state)                    model trees -> converted checkpoint
Layouts, the MTP naming and the memory bound are documented in README.md next to this file.
"""

from composer2_jax.convert.checkpoint import restore_checkpoint, save_checkpoint
from composer2_jax.convert.exporter import export_hf
from composer2_jax.convert.hf_config import hf_model_config, read_hf_config, to_hf_config, write_hf_config
from composer2_jax.convert.hf_source import CheckpointError
from composer2_jax.convert.importer import import_hf, load_hf_checkpoint

__all__ = ["read_hf_config", "hf_model_config", "to_hf_config", "write_hf_config", "load_hf_checkpoint",
           "import_hf", "export_hf", "restore_checkpoint", "save_checkpoint", "CheckpointError"]
