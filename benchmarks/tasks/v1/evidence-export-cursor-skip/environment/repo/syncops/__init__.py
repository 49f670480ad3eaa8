"""Readers and reports over the contacts API's exports (docs/formats.md)."""
