"""Readers, reports and helpers over the webhook platform's exports (docs/formats.md)."""

__version__ = "1.6.0"
