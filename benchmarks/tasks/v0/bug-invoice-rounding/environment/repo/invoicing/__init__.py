"""Invoices for the web shop."""

from invoicing.invoice import Invoice
from invoicing.line import Line

__all__ = ["Invoice", "Line"]
