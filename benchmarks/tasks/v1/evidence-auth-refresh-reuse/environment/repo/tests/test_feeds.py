import unittest

from authops import feeds

from tests.fixture import T0, build


class FeedsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_gateway_once(self):
        self.assertEqual(len(list(feeds.iter_gateway(self.dir))), 8)
        self.assertEqual(len(list(feeds.iter_gateway(self.dir, dedup=False))), 9)
        self.assertEqual(sorted(feeds.requests(self.dir, paths={"/oauth/revoke"})), ["r7"])

    def test_parse_event(self):
        e = feeds.parse_event("2023-12-25T00:16:40.020000+00:00 a2 refresh fam=fam_a gen=1->2 req=r2\n")
        self.assertEqual((e.ts, e.node, e.verb, e.fields["gen"]), (T0 + 1000.02, "a2", "refresh", (1, 2)))
        self.assertEqual(feeds.parse_event("2023-12-25T00:00:00+00:00 a1 reuse fam=f gen=4 req=r").fields["gen"], 4)
        self.assertIsNone(feeds.parse_event("2023-12-25T00:00:00+00:00 a1 reuse oops\n"))
        with self.assertRaises(ValueError):
            feeds.parse_time("2023-12-25T00:00:00")

    def test_auth_and_ended(self):
        self.assertEqual(len(list(feeds.iter_auth(self.dir))), 7)
        self.assertEqual(sorted(r["reason"] for r in feeds.iter_ended(self.dir)), ["expired", "revoked_reuse", "user"])


if __name__ == "__main__":
    unittest.main()
