import unittest

from hookops import feeds, timefmt

from tests.fixture import T0, build, line


class FeedsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_parse_attempt(self):
        a = feeds.parse_attempt(line(T0 + 1.5, "w1", "dl_x", "evt_x", "ep_9", "manual", "302", via="301"))
        self.assertEqual((a.ts, a.try_, a.status, a.via, a.ms), (T0 + 1.5, "manual", "302", "301", 40))
        self.assertIsNone(feeds.parse_attempt("garbage line\n"))

    def test_repeated_lines_once(self):
        self.assertEqual(sum(1 for _ in feeds.iter_attempts(self.dir)), 15)
        self.assertEqual(sum(1 for _ in feeds.iter_attempts(self.dir, dedup=False)), 16)

    def test_deliveries(self):
        d = feeds.deliveries(self.dir)
        self.assertEqual({k: v["state"] for k, v in d.items()},
                         {"dl_a": "delivered", "dl_b": "delivered", "dl_c": "dead", "dl_d": "failed",
                          "dl_e": "delivered"})
        self.assertEqual(d["dl_c"]["attempts"], 8)
        self.assertEqual(sorted(feeds.final_states(self.dir)), ["dl_a", "dl_b", "dl_c", "dl_d", "dl_e"])

    def test_attempts_by_delivery_in_time_order(self):
        by = feeds.attempts_by_delivery(self.dir)
        self.assertEqual([a.status for a in by["dl_e"]], ["308", "200"])
        self.assertEqual([a.try_ for a in by["dl_c"]][-1], "manual")

    def test_times(self):
        self.assertEqual(timefmt.parse_iso(timefmt.format_iso(T0 + 0.25)), T0 + 0.25)
        self.assertEqual(timefmt.parse_iso("2023-12-11T00:00:00Z"), T0)
        with self.assertRaises(ValueError):
            timefmt.parse_iso("2023-12-11T00:00:00+01:00")
        self.assertEqual(timefmt.human(0.85), "850 ms")
        self.assertEqual(timefmt.human(130), "2 min 10 s")
        self.assertEqual(timefmt.human(3 * 3600 + 300), "3 h 05 min")
        self.assertEqual(timefmt.day_name(T0 + 86400 * 2 + 5, T0), "d2")


if __name__ == "__main__":
    unittest.main()
