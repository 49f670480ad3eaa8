"""Command line: `python -m billops.cli COMMAND LOG_DIR` with COMMAND one of report, vat, movements, dunning,
renewals (the next seven days after the week), receivables, reconcile."""

from __future__ import annotations

import argparse
import json
import sys

from billops import dunning, mrr, receivables, reconcile, renewals, report, tax
from billops.invoices import read_invoices

WEEK_S = 7 * 86400


def _week_end(log_dir: str) -> float:
    issued = [inv.issued for inv in read_invoices(log_dir).values()]
    return max(issued) if issued else 0.0


def run(command: str, log_dir: str) -> object:
    if command == "report":
        return report.weekly(log_dir)
    if command == "vat":
        return tax.summary(read_invoices(log_dir))
    if command == "movements":
        return mrr.movements(log_dir)
    if command == "dunning":
        return dunning.dunning_list(log_dir)
    if command == "renewals":
        end = _week_end(log_dir)
        return renewals.forecast(log_dir, end, end + WEEK_S)
    if command == "receivables":
        return receivables.balances(log_dir)
    if command == "reconcile":
        return reconcile.summary(reconcile.reconcile(log_dir))
    raise ValueError(command)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m billops.cli", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=("report", "vat", "movements", "dunning", "renewals", "receivables",
                                          "reconcile"))
    p.add_argument("log_dir")
    args = p.parse_args(argv)
    json.dump(run(args.command, args.log_dir), sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
