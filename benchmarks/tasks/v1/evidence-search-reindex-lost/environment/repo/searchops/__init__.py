"""Readers, reports and audits over the product search pipeline's exports (docs/formats.md)."""

__version__ = "0.9.0"
