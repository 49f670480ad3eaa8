import unittest

from authops import review, sessions

from tests.fixture import T0, build


class SessionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = build()

    def test_timeline_across_nodes(self):
        tl = sessions.timeline(self.dir, "fam_a")
        self.assertEqual([(n, v) for _, n, v, _, _, _ in tl],
                         [("a1", "login"), ("a2", "refresh"), ("a2", "reuse"), ("a3", "refresh"), ("a1", "reuse")])
        self.assertEqual(tl[-1][4:], ("dev_9", "203.0.113.7"))

    def test_generations_and_end(self):
        fams = sessions.by_family(self.dir)
        self.assertEqual(sessions.generations(fams["fam_a"]), 3)
        self.assertEqual(sessions.end_of(fams["fam_a"]), (T0 + 9000.01, "revoke"))
        self.assertEqual(sessions.end_of(fams["fam_b"])[1], "logout:user")
        self.assertEqual(sessions.end_of(fams["fam_c"])[1], "expire")
        self.assertEqual(sessions.lifetime_left(T0, T0 + 29 * 86400), 86400)
        self.assertEqual(sessions.lifetime_left(T0, T0 + 31 * 86400), 0.0)

    def test_review(self):
        rows = review.revocations(self.dir)
        self.assertEqual(len(rows), 1)
        self.assertEqual((rows[0]["fam"], rows[0]["gen"], rows[0]["new_address"]), ("fam_a", 1, True))


if __name__ == "__main__":
    unittest.main()
