"""Readers and reports over the training cluster's exports (docs/log-formats.md)."""
