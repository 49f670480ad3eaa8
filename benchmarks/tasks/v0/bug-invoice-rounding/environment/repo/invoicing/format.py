"""Formatting."""


def money(amount):
    """'$1,234.50'."""
    return f"${amount:,.2f}"
