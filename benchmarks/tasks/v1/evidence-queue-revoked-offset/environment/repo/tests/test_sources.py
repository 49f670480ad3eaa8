import json
import os
import tempfile
import unittest

from mailops import report, sources


class SourcesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for sub in ("producer", "consumer", "broker"):
            os.makedirs(os.path.join(self.dir, sub))
        with open(os.path.join(self.dir, "producer", "checkout-d0.jsonl"), "w") as f:
            f.write(json.dumps({"ts": 10.0, "service": "checkout", "topic": "orders.confirmed", "msg": "m1",
                                "order": "o1", "attempt": 1, "partition": 0, "status": "acked", "offset": 4}) + "\n")
        with open(os.path.join(self.dir, "consumer", "mailer-0-d0-h00.log"), "w") as f:
            f.write("1970-01-01T00:00:11.000Z INFO  mailer-0 received partition=0 offset=4 msg=m1 attempt=1\n"
                    "1970-01-01T00:00:11.300Z INFO  mailer-0 sent partition=0 offset=4 msg=m1 order=o1 ms=30\n")
        with open(os.path.join(self.dir, "broker", "broker-d0.jsonl"), "w") as f:
            f.write("")

    def test_consumer_line(self):
        e = next(sources.consumer_events(self.dir, ("sent",)))
        self.assertEqual((e["consumer"], e["msg"], e["offset"], e["level"]), ("mailer-0", "m1", "4", "INFO"))

    def test_report(self):
        days = report.daily(self.dir)
        self.assertEqual(days[0.0]["accepted"], 1)
        self.assertEqual(days["1970-01-01"]["sent"], 1)


if __name__ == "__main__":
    unittest.main()
