"""Finance tooling for the subscription billing exports (events, invoices, ledger)."""
