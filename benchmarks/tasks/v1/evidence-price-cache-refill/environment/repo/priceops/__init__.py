"""Readers and reports over the shop's pricing exports (docs/formats.md)."""
