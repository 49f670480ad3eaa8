"""Readers for the resolver fleet's exports and the weekly cache report."""
