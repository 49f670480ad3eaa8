import unittest

from agentstream import Watchdog, replay


class WatchdogTest(unittest.TestCase):
    def test_data_keeps_it_alive(self):
        dog = Watchdog(1000, start_ms=0)
        dog.observe({"type": "delta", "ts": 900})
        self.assertFalse(dog.expired(1800))
        self.assertTrue(dog.expired(1901))

    def test_replay_of_a_stall(self):
        events = [{"type": "start", "ts": 0}, {"type": "delta", "ts": 10}, {"type": "delta", "ts": 50_000}]
        self.assertEqual(replay(events), [30_011])


if __name__ == "__main__":
    unittest.main()
