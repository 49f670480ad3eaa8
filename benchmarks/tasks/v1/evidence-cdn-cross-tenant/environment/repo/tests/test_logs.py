import json
import os
import tempfile
import unittest

from edgeops import hit_ratio, logs, origin_errors

LINE = ('2023-11-27T05:00:09.977Z fra1 e92 s7e t-a02 "GET /api/v2/catalog/shoes?page=2" 200 HIT 5992 '
        '"ef83b098b51388ce" 3ms "Mozilla/5.0 (iPhone)"\n')


class LogsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.dir, "edge"))
        os.makedirs(os.path.join(self.dir, "origin"))
        with open(os.path.join(self.dir, "edge", "fra1-d0-h05.log"), "w") as f:
            f.write(LINE + LINE.replace(" HIT ", " MISS ").replace("e92", "e93"))
        with open(os.path.join(self.dir, "origin", "origin-a-d0.jsonl"), "w") as f:
            f.write(json.dumps({"ts": 90000.0, "node": "origin-a", "edge_req": "e93", "tenant": "t-a02",
                                "path": "/x", "status": 503, "etag": None, "scope": "tenant", "max_age": 600,
                                "ms": 9}) + "\n")

    def test_edge_line(self):
        e = logs.parse_edge_line(LINE)
        self.assertEqual((e["path"], e["cache"], e["ms"], e["etag"], e["ua"]),
                         ("/api/v2/catalog/shoes?page=2", "HIT", 3, "ef83b098b51388ce", "Mozilla/5.0 (iPhone)"))

    def test_hit_ratio(self):
        self.assertEqual(hit_ratio.hit_ratio(self.dir)[("fra1", "/api/v2/catalog/*")]["ratio"], 0.5)

    def test_origin_errors(self):
        self.assertEqual(origin_errors.errors(self.dir, 0), {("origin-a", 1): {503: 1}})


if __name__ == "__main__":
    unittest.main()
