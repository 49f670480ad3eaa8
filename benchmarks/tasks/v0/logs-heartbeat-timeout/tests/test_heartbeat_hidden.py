import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_sessions  # noqa: E402

from agentstream import Watchdog, replay  # noqa: E402


class HiddenWatchdogTest(unittest.TestCase):
    def test_heartbeat_keeps_it_alive(self):
        dog = Watchdog(30_000, start_ms=0)
        for t in range(10_000, 120_001, 10_000):
            dog.observe({"type": "heartbeat", "ts": t})
            self.assertFalse(dog.expired(t + 30_000))
        self.assertTrue(dog.expired(150_001))

    def test_boundary(self):
        dog = Watchdog(1000, start_ms=0)
        self.assertFalse(dog.expired(1000))
        self.assertTrue(dog.expired(1001))

    def test_replay_matches_a_correct_client(self):
        rng = random.Random(3)
        for i in range(200):
            capture, _ = gen_sessions.make_session(rng, f"x{i}")
            want = gen_sessions.fires(capture, {"start", "delta", "heartbeat", "end"})
            self.assertEqual(replay(capture), want, i)


class HiddenDetectorTest(unittest.TestCase):
    def test_detector_on_fresh_captures(self):
        import detect
        with tempfile.TemporaryDirectory() as d:
            labels = gen_sessions.write_captures(d, seed=5150, count=250)
            wrong = [s for s, bad in labels.items() if bool(detect.is_spurious(os.path.join(d, s + ".jsonl"))) != bad]
        self.assertGreater(sum(labels.values()), 10)
        self.assertGreater(len(labels) - sum(labels.values()), 10)
        self.assertLessEqual(len(wrong), 5, wrong[:10])


if __name__ == "__main__":
    unittest.main()
