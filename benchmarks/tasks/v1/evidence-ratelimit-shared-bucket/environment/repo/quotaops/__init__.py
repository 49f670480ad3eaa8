"""Readers and reports over the API gateway's logs and the customers' plans (docs/log-formats.md)."""
