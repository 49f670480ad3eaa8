import json
import os
import tempfile
import unittest

from dnsops import report, zone


class DnsopsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for sub in ("resolvers/r1", "upstream", "zone"):
            os.makedirs(os.path.join(self.dir, sub))
        line = "100 r1 c1 api.example.net 10.0.0.1 300 miss\n"
        with open(os.path.join(self.dir, "resolvers", "r1", "d0-00.log"), "w") as f:
            f.write(line + line + "150 r1 c2 api.example.net 10.0.0.1 250 hit\n")
        with open(os.path.join(self.dir, "upstream", "r1.jsonl"), "w") as f:
            f.write(json.dumps({"ts": 100, "node": "r1", "name": "api.example.net", "ok": True,
                                "value": "10.0.0.1", "ttl": 300}) + "\n")
        with open(os.path.join(self.dir, "zone", "snapshot.json"), "w") as f:
            json.dump({"ts": 0, "records": {"api.example.net": {"value": "10.0.0.1", "ttl": 300}}}, f)
        with open(os.path.join(self.dir, "zone", "changes.jsonl"), "w") as f:
            f.write(json.dumps({"ts": 200, "name": "api.example.net", "value": "10.0.0.2"}) + "\n")

    def test_zone_value_over_time(self):
        z = zone.Zone(self.dir)
        self.assertEqual((z.value("api.example.net", 199), z.value("api.example.net", 200)), ("10.0.0.1", "10.0.0.2"))

    def test_report_counts_a_repeated_line_once(self):
        self.assertEqual(report.by_node(self.dir), {"r1": {"answers": 2, "hit_rate": 0.5, "servfail": 0, "stale": 0,
                                                           "fetch_failures": 0}})


if __name__ == "__main__":
    unittest.main()
