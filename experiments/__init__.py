"""Experiment files: one runnable module per stage, each defining get_config(preset)."""
