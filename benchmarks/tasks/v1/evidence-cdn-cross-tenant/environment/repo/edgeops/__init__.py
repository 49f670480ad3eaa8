"""Readers and reports over the edge caches' and the origin's logs (docs/log-formats.md)."""
