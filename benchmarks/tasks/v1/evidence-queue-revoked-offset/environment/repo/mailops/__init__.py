"""Readers and reports over the order-confirmation pipeline's exports (docs/log-formats.md)."""
