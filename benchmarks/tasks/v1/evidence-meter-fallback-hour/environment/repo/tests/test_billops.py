import json
import os
import tempfile
import unittest

from billops import meters, summary


class BillopsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.dir, "meters"))
        os.makedirs(os.path.join(self.dir, "ingest"))
        with open(os.path.join(self.dir, "meters", "m1.csv"), "w") as f:
            f.write("local_time,utc_offset,kwh_counter\nd0 00:00,+00:00,1.000\nd0 00:15,+00:00,1.250\n")
        line = {"meter": "m1", "interval": "a1", "start": 0, "end": 900, "kwh": 0.25}
        with open(os.path.join(self.dir, "ingest", "ingest-d0.jsonl"), "w") as f:
            f.write(json.dumps(line) + "\n" + json.dumps(line) + "\n")
        with open(os.path.join(self.dir, "registry.json"), "w") as f:
            json.dump({"m1": {"zone": "UTC", "firmware": "2.0"}}, f)

    def test_report(self):
        (mid, rows), = list(meters.iter_reports(self.dir))
        self.assertEqual((mid, rows[-1]["kwh_counter"]), ("m1", 1.25))

    def test_summary_counts_an_interval_once(self):
        self.assertEqual(summary.by_zone(self.dir), {"UTC": {"meters": 1, "intervals": 1, "kwh": 0.25}})


if __name__ == "__main__":
    unittest.main()
