import unittest

from hookops import endpoints, replay

from tests.fixture import T0, build


class EndpointsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_health(self):
        h = endpoints.health(self.dir)
        self.assertEqual((h["ep_1"]["attempts"], h["ep_1"]["failed"], h["ep_1"]["streak"]), (3, 1, 0))
        self.assertEqual((h["ep_2"]["failed"], h["ep_2"]["timeouts"]), (9, 8))
        self.assertEqual(h["ep_2"]["streak"], 0)  # the manual redelivery answered 200
        self.assertEqual((h["ep_3"]["attempts"], h["ep_3"]["redirects"], h["ep_3"]["failed"]), (1, 1, 0))
        self.assertEqual(h["ep_3"]["url"], "https://hooks2.acme.io/in")
        self.assertEqual(endpoints.redirecting(self.dir), {"ep_3": {"308": 1}})

    def test_verdict(self):
        row = {"attempts": 60, "failed": 60, "streak": 60, "streak_since": T0}
        self.assertEqual(endpoints.verdict(row, T0 + 4 * 86400), "disable")
        self.assertEqual(endpoints.verdict(row, T0 + 86400), "watch")
        self.assertEqual(endpoints.verdict({"attempts": 10, "failed": 1, "streak": 0, "streak_since": None}, T0),
                         "ok")
        self.assertEqual(endpoints.ranked(self.dir, T0)[0][0], "ep_2")

    def test_replay_plan(self):
        self.assertEqual([d for _, d, _ in replay.dead_letters(self.dir, "ep_2")], ["dl_c"])
        self.assertEqual(replay.plan(self.dir, "ep_2"), [])  # redelivered from the dashboard already
        self.assertEqual(replay.plan(self.dir, "ep_1"), [])


if __name__ == "__main__":
    unittest.main()
