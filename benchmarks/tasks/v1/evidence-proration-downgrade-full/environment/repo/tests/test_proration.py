import unittest

from billops import proration
from billops.periods import CYCLE_S, DAY, fraction_left, iso, parse_iso

T0 = 1_704_672_000


class PeriodsTest(unittest.TestCase):
    def test_iso_round_trip(self):
        self.assertEqual(parse_iso("2024-01-08T00:00:00Z"), T0)
        self.assertEqual(iso(T0 + 61), "2024-01-08T00:01:01Z")

    def test_fraction_left(self):
        self.assertEqual(fraction_left(0, 100, 25), 0.75)
        self.assertEqual(fraction_left(0, 100, 150), 0.0)
        with self.assertRaises(ValueError):
            fraction_left(5, 5, 5)


class ProrationTest(unittest.TestCase):
    def test_prorate_rounds_half_up(self):
        self.assertEqual(proration.prorate(4900, 0, 30, 15), 2450)
        self.assertEqual(proration.prorate(1, 0, 2, 1), 1)

    def test_downgrade_mid_cycle_credits_the_balance(self):
        q = proration.plan_change("business", "team", T0, T0 + CYCLE_S, T0 + 10 * DAY)
        self.assertEqual(q.charge, proration.prorate(4900, T0, T0 + CYCLE_S, T0 + 10 * DAY))
        self.assertEqual(q.invoice_credit, 0)
        self.assertEqual(q.balance_credit, proration.prorate(12900, T0, T0 + CYCLE_S, T0 + 10 * DAY))
        self.assertFalse(q.full_cycle)
        self.assertLess(q.net, 0)

    def test_upgrade_credits_on_the_invoice(self):
        q = proration.plan_change("team", "scale", T0, T0 + CYCLE_S, T0 + 20 * DAY)
        self.assertGreater(q.invoice_credit, 0)
        self.assertEqual(q.balance_credit, 0)

    def test_change_right_after_renewal_reissues_the_cycle(self):
        q = proration.plan_change("scale", "starter", T0, T0 + CYCLE_S, T0 + 3600)
        self.assertTrue(q.full_cycle)
        self.assertEqual((q.charge, q.balance_credit), (1500, 0))

    def test_period_end_bills_nothing_now(self):
        self.assertEqual(proration.plan_change("team", "starter", T0, T0 + CYCLE_S, T0 + 5 * DAY, "period_end").net, 0)

    def test_seats(self):
        self.assertEqual(proration.seats_change(3, 2, T0, T0 + CYCLE_S, T0).charge, 0)
        self.assertEqual(proration.seats_change(2, 4, T0, T0 + CYCLE_S, T0).charge, 1800)
