import csv
import json
import os
import tempfile
import unittest

from payops import gateway, ledger, revenue


class ReadersTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.dir, "gateway"))
        os.makedirs(os.path.join(self.dir, "ledger"))
        lines = [{"ts": 10.0, "host": "edge-1", "route": "POST /v1/charges", "req": "r1", "key": "k1", "account": "a",
                  "attempt": 1, "upstream": "s0", "status": 504, "trace": "t1", "txn": None, "ms": 30000},
                 {"ts": 12.0, "host": "edge-1", "route": "POST /v1/charges", "req": "r1", "key": "k1", "account": "a",
                  "attempt": 2, "upstream": "s0", "status": 200, "trace": "t2", "txn": "x1", "ms": 90}]
        with open(os.path.join(self.dir, "gateway", "gw-edge-1-d0-h00.jsonl"), "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in lines + lines[1:])
        with open(os.path.join(self.dir, "ledger", "ledger-s0-d0.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["txn", "account", "kind", "amount_cents", "currency", "created", "trace"])
            w.writerows([["x1", "a", "charge", 999, "EUR", 0.5, "t1"], ["x1", "a", "charge", 999, "EUR", 0.5, "t1"],
                         ["x2", "a", "refund", -999, "EUR", 900.0, "t9"]])

    def test_error_rate_counts_attempts_once(self):
        self.assertEqual(gateway.error_rate(self.dir, "POST /v1/charges"), 0.5)

    def test_transactions_once(self):
        self.assertEqual(sorted(ledger.transactions(self.dir)), ["x1", "x2"])

    def test_revenue(self):
        self.assertEqual(revenue.by_day(self.dir, 0), {0: {"charges": 1, "refunds": 1, "net_cents": 0}})


if __name__ == "__main__":
    unittest.main()
