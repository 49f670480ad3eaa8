import io
import shutil
import unittest
from contextlib import redirect_stdout

from billops import cli, receivables, renewals

from tests.fixtures import START, week


class ToolsTest(unittest.TestCase):
    def setUp(self):
        self.logs = week()

    def tearDown(self):
        shutil.rmtree(self.logs)

    def test_renewals_due(self):
        rows = renewals.due(self.logs, START, START + 40 * 86400)
        self.assertEqual([(r["account"], r["plan"]) for r in rows], [("a1", "business"), ("a2", "team")])
        self.assertEqual(rows[0]["cents"], 12900 + 2 * 900)
        self.assertEqual(renewals.forecast(self.logs, START, START + 40 * 86400)["us-east"], 4900 + 2 * 900)
        self.assertEqual(renewals.due(self.logs, START, START + 86400), [])

    def test_receivables_only_invoice_billing(self):
        self.assertEqual(receivables.open_items(self.logs), [])
        self.assertEqual(receivables.balances(self.logs), {})

    def test_cli(self):
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(cli.main(["movements", self.logs]), 0)
        self.assertIn('"upgrades": 1', out.getvalue())
        with self.assertRaises(ValueError):
            cli.run("nothing", self.logs)


class ReconcileTest(unittest.TestCase):
    def setUp(self):
        self.logs = week()

    def tearDown(self):
        shutil.rmtree(self.logs)

    def test_reconcile(self):
        from billops import reconcile
        got = reconcile.reconcile(self.logs)
        self.assertEqual([(m.invoice, m.problem) for m in got],
                         [("in_2", "not finalized"), ("in_3", "not finalized")])
        self.assertEqual(reconcile.summary(got), {"not finalized": 2})
