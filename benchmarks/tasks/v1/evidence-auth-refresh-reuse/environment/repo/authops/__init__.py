"""Readers, reports and reviews over the sign-in stack's exports (docs/formats.md)."""

__version__ = "2.3.0"
