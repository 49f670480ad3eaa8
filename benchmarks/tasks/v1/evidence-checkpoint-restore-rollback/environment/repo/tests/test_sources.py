import json
import os
import tempfile
import unittest

from trainops import report, sources


class SourcesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for sub in ("trainer", "scheduler", "checkpoints"):
            os.makedirs(os.path.join(self.dir, sub))
        with open(os.path.join(self.dir, "trainer", "job-1.log"), "w") as f:
            f.write("1970-01-01 00:00:10,500 INFO [trainer] step=100 loss=2.0 lr=3.00e-04 tokens_per_s=9000\n")
        e = {"ts": 5.0, "job": "job-1", "ev": "submit", "node": "gpu-01", "user": "ana", "steps": 100}
        with open(os.path.join(self.dir, "scheduler", "events-d0.jsonl"), "w") as f:
            f.write(json.dumps(e) + "\n" + json.dumps(e) + "\n")
        with open(os.path.join(self.dir, "checkpoints", "index.csv"), "w") as f:
            f.write("id,job,step,started,finished,deleted,bytes\nck-1,job-1,100,11.0,70.0,,2000000000\n"
                    "ck-2,job-1,200,90.0,,,3000000000\n")

    def test_trainer_lines(self):
        (t, level, message), = list(sources.trainer_lines(self.dir, "job-1"))
        self.assertEqual((t, level, message.split()[0]), (10.5, "INFO", "step=100"))

    def test_events_once(self):
        self.assertEqual(len(sources.scheduler_events(self.dir)), 1)

    def test_report(self):
        self.assertEqual(report.daily(self.dir, 0), {0: {"submitted": 1, "preempted": 0, "finished": 0,
                                                         "checkpoint_gb": 2.0}})


if __name__ == "__main__":
    unittest.main()
