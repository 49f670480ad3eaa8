import unittest

from billops import plans


class PlansTest(unittest.TestCase):
    def test_prices_rise_with_rank(self):
        prices = [plans.price(p) for p in plans.PLAN_ORDER]
        self.assertEqual(prices, sorted(prices))
        self.assertEqual(plans.rank("starter"), 0)

    def test_downgrade_and_upgrade(self):
        self.assertTrue(plans.is_downgrade("business", "team"))
        self.assertFalse(plans.is_downgrade(None, "team"))
        self.assertTrue(plans.is_upgrade("starter", "scale"))
        self.assertFalse(plans.is_upgrade("team", "team"))

    def test_unknown_plan(self):
        with self.assertRaises(plans.UnknownPlan):
            plans.price("gold")
        with self.assertRaises(plans.UnknownPlan):
            plans.addon_price("fax")
