import unittest

from hookops import retry


class RetryTest(unittest.TestCase):
    def test_classify(self):
        self.assertEqual([retry.classify(s) for s in ("200", "204", "409", "429", "410", "400", "503", "timeout")],
                         ["delivered", "delivered", "retry", "retry", "failed", "failed", "retry", "retry"])
        with self.assertRaises(ValueError):
            retry.classify("teapot")

    def test_schedule(self):
        self.assertEqual(retry.next_attempt_after(1), (27.0, 36.0))
        self.assertIsNone(retry.next_attempt_after(8))
        lo, hi = retry.give_up_after()
        self.assertAlmostEqual(lo, 0.9 * 38550)
        self.assertGreater(hi, 1.2 * 38550)
        with self.assertRaises(ValueError):
            retry.next_attempt_after(0)

    def test_gaps(self):
        gaps = retry.schedule_gaps([0, 31, 160, 2000])
        self.assertEqual([g[2] for g in gaps], [True, True, False])


if __name__ == "__main__":
    unittest.main()
