"""Readers for the metering pipeline's exports and the weekly reconciliation summary."""
