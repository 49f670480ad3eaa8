"""Revenue reports."""
