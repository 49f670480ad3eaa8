"""Readers for the streaming service's logs and the daily traffic report."""
