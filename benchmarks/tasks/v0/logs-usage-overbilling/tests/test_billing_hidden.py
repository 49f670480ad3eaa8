import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_usage  # noqa: E402

from billing import Usage, usage_of  # noqa: E402
from billing.pricing import charge_micros  # noqa: E402


class HiddenUsageTest(unittest.TestCase):
    def test_cumulative_deltas(self):
        events = [{"type": "message_start", "request": "r", "usage": {"input_tokens": 100, "output_tokens": 1}},
                  {"type": "message_delta", "usage": {"output_tokens": 10}},
                  {"type": "message_delta", "usage": {"output_tokens": 25}},
                  {"type": "message_delta", "usage": {"output_tokens": 40}}, {"type": "message_stop"}]
        self.assertEqual(usage_of(events), Usage(100, 40))
        self.assertEqual(charge_micros(usage_of(events)), 100 * 3 + 40 * 15)

    def test_generated_responses(self):
        rng = random.Random(5)
        for i in range(300):
            events, _ = gen_usage.make_response(rng, f"r{i}")
            self.assertEqual(usage_of(events).output_tokens, gen_usage.true_output(events))


class HiddenDetectorTest(unittest.TestCase):
    def test_detector_on_fresh_logs(self):
        import detect
        with tempfile.TemporaryDirectory() as d:
            rows = gen_usage.write_logs(d, seed=8080, count=250)
            wrong = [r for r, (bad, _) in rows.items() if bool(detect.is_overbilled(os.path.join(d, r + ".jsonl"))) != bad]
        self.assertGreater(sum(bad for bad, _ in rows.values()), 10)
        self.assertLessEqual(len(wrong), 5, wrong[:10])


if __name__ == "__main__":
    unittest.main()
