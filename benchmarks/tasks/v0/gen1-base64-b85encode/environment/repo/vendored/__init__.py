"""Vendored copies of standard-library modules."""
