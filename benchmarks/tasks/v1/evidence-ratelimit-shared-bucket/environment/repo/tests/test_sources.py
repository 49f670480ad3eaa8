import json
import os
import tempfile
import unittest

from quotaops import sources, usage


class SourcesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.dir, "gateway"))
        os.makedirs(os.path.join(self.dir, "plans"))
        line = {"ts": 120.5, "host": "gw-1", "req": "q1", "key": "ak_1", "route": "GET /v2/items", "status": 200,
                "reason": None, "ms": 12}
        refused = dict(line, req="q2", status=429, reason="rate_limit", ts=121.0)
        with open(os.path.join(self.dir, "gateway", "gw-gw-1-d0-h00.jsonl"), "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in (line, line, refused))
        with open(os.path.join(self.dir, "plans", "plans.json"), "w") as f:
            json.dump({"ak_1": [{"from": 100, "limit": 40}, {"from": 0, "limit": 20}]}, f)
        with open(os.path.join(self.dir, "plans", "keys.csv"), "w") as f:
            f.write("key,org,created\nak_1,org_1,0\n")

    def test_requests_once(self):
        self.assertEqual(sorted(sources.requests(self.dir)), ["q1", "q2"])

    def test_plans_in_order(self):
        self.assertEqual([p["limit"] for p in sources.plans(self.dir)["ak_1"]], [20, 40])

    def test_usage(self):
        self.assertEqual(usage.usage(self.dir)["ak_1"], {"requests": 2, "refused_rate_limit": 1,
                                                         "refused_overload": 0, "busiest_minute": 2})


if __name__ == "__main__":
    unittest.main()
