import json
import os
import tempfile
import unittest

from priceops import feeds, report


class PriceopsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for sub in ("orders", "cache", "db"):
            os.makedirs(os.path.join(self.dir, sub))
        order = {"ts": 100.0, "order": "o_1", "customer": "cu_1", "node": "pc1", "sku": "SKU-1", "qty": 2, "currency": "EUR",
                 "unit_cents": 999, "priced_at": 100.0, "quote": None, "payment": "card"}
        with open(os.path.join(self.dir, "orders", "orders-d0-h00.jsonl"), "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in (order, order, dict(order, order="o_2", qty=1)))
        with open(os.path.join(self.dir, "cache", "pc1-d0-h00.log"), "w") as f:
            f.write("50.000 pc1 inval SKU-1 1\n50.100 pc1 fill SKU-1 primary 1 999\n70.000 pc1 fill SKU-2 r2 1 5\n")
        with open(os.path.join(self.dir, "db", "prices-d0.csv"), "w") as f:
            f.write("lsn,committed,sku,unit_cents,effective\n1,49.5,SKU-1,999,49.5\n")

    def test_orders_once(self):
        self.assertEqual(sorted(feeds.orders(self.dir)), ["o_1", "o_2"])

    def test_report(self):
        self.assertEqual(report.by_day(self.dir, 0), {0: {"orders": 2, "revenue_cents": 2997, "changes": 1,
                                                          "fills": 2, "primary_fills": 1}})


if __name__ == "__main__":
    unittest.main()
