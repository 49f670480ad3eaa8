"""Polygon utilities."""
