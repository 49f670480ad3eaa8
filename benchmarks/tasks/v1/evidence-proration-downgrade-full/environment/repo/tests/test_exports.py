import shutil
import unittest

from billops import dunning, events, invoices, ledger, mrr, report, tax

from tests.fixtures import week


class ExportsTest(unittest.TestCase):
    def setUp(self):
        self.logs = week()

    def tearDown(self):
        shutil.rmtree(self.logs)

    def test_events_once_per_id(self):
        got = list(events.read_events(self.logs))
        self.assertEqual([e["id"] for e in got], ["evt_1", "evt_2", "evt_3", "evt_4"])
        self.assertEqual(len(events.by_id(self.logs, ("subscription.updated",))), 1)
        self.assertEqual(events.accounts(self.logs)["a1"]["plan"], "business")
        self.assertEqual(events.usage_totals(self.logs)["a2"]["api_calls"], 10)

    def test_invoices_dedupe_rows(self):
        got = invoices.read_invoices(self.logs)
        self.assertEqual(sorted(got), ["in_1", "in_2", "in_3"])
        self.assertEqual([x.line for x in got["in_1"].lines], [1, 2, 3])
        self.assertEqual(got["in_1"].subtotal, 5600)
        self.assertEqual(got["in_1"].total, 6720)
        self.assertTrue(got["in_1"].has("proration_credit"))

    def test_ledger(self):
        entries = list(ledger.read_ledger(self.logs))
        self.assertEqual(len(entries), 6)
        self.assertEqual(ledger.parse("1.0 eu-west ledger payment declined attempt=1 invoice=x").words, ("declined",))
        self.assertIsNone(ledger.parse("garbage"))
        self.assertEqual([n.get("reason") for n in ledger.credit_notes(self.logs)], ["goodwill"])
        self.assertEqual(ledger.credit_notes(self.logs, "proration"), [])
        self.assertEqual(ledger.voided(self.logs), {"in_0"})

    def test_tax(self):
        got = invoices.read_invoices(self.logs)
        self.assertEqual(tax.vat_on(5600, "eu-west"), 1120)
        self.assertEqual(tax.vat_on(5600, "us-east"), 0)
        self.assertEqual(tax.vat_on(-10, "eu-west"), 0)
        self.assertEqual(tax.vat_per_line([3, 3], "eu-west"), 2)
        self.assertEqual(tax.check_invoice(got["in_1"]), 0)
        self.assertEqual(tax.summary(got)["eu-west"]["vat"], 1120)

    def test_mrr_and_movements(self):
        self.assertEqual(mrr.mrr(self.logs)["eu-west"], {"business": 12900 + 2 * 900})
        self.assertEqual(mrr.movements(self.logs), {"upgrades": 1, "downgrades_now": 0, "downgrades_period_end": 0})

    def test_dunning(self):
        self.assertEqual(dunning.unpaid_card_invoices(self.logs), ["in_2"])
        self.assertEqual(dunning.dunning_list(self.logs)[0]["total"], 4900)

    def test_report(self):
        text = report.render(report.weekly(self.logs))
        self.assertIn("invoices: 3 (voided 1, unpaid card 1)", text)
        self.assertIn("goodwill 5.00", text)
        self.assertEqual(report.main([]), 2)
