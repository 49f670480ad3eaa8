import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_streams  # noqa: E402

from streamkit import assemble, read_events  # noqa: E402


class HiddenAssembleTest(unittest.TestCase):
    def test_chunks_sharing_a_timestamp(self):
        events = [{"type": "chunk", "seq": 0, "ts": 5, "delta": "a"}, {"type": "chunk", "seq": 1, "ts": 5, "delta": "b"},
                  {"type": "chunk", "seq": 2, "ts": 9, "delta": "c"}]
        self.assertEqual(assemble(events), "abc")

    def test_resent_chunks_once(self):
        events = [{"type": "chunk", "seq": 0, "ts": 1, "delta": "a"}, {"type": "chunk", "seq": 1, "ts": 2, "delta": "b"},
                  {"type": "reconnect", "ts": 50}, {"type": "chunk", "seq": 1, "ts": 60, "delta": "b"},
                  {"type": "chunk", "seq": 2, "ts": 61, "delta": "c"}]
        self.assertEqual(assemble(events), "abc")

    def test_generated_sessions_match_the_protocol(self):
        rng = random.Random(99)
        for i in range(300):
            events, _ = gen_streams.make_session(rng, f"t{i}")
            self.assertEqual(assemble(events), gen_streams.correct_assemble(events))


class HiddenDetectorTest(unittest.TestCase):
    def test_detector_on_fresh_sessions(self):
        import detect
        with tempfile.TemporaryDirectory() as d:
            labels = gen_streams.write_logs(d, seed=777, count=250)
            tp = fp = fn = tn = 0
            for sid, bad in labels.items():
                got = bool(detect.is_affected(os.path.join(d, f"{sid}.jsonl")))
                tp, fp, fn, tn = tp + (got and bad), fp + (got and not bad), fn + (bad and not got), tn + (not got and not bad)
        self.assertGreater(tp + fn, 10)
        recall, precision = tp / (tp + fn), tp / max(1, tp + fp)
        self.assertGreaterEqual(recall, 0.95, (tp, fp, fn, tn))
        self.assertGreaterEqual(precision, 0.95, (tp, fp, fn, tn))

    def test_repository_logs_still_load(self):
        logs = sorted(os.listdir("logs"))
        self.assertGreaterEqual(len(logs), 100)
        self.assertTrue(assemble(read_events(os.path.join("logs", logs[0]))))


if __name__ == "__main__":
    unittest.main()
