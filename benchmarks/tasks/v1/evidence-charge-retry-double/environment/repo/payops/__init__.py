"""Readers and reports over the payments API's exports (docs/log-formats.md)."""
