import unittest

from telemetry import http, metrics


class MetricsTest(unittest.TestCase):
    def setUp(self):
        metrics.reset()

    def test_counters(self):
        self.assertEqual(metrics.incr("a"), 1)
        self.assertEqual(metrics.incr("a", 5), 6)
        self.assertEqual(metrics.get("b"), 0)

    def test_http(self):
        http.handle({}, lambda r: "ok")
        with self.assertRaises(RuntimeError):
            http.handle({}, lambda r: (_ for _ in ()).throw(RuntimeError("boom")))
        self.assertEqual((metrics.get("http.requests"), metrics.get("http.errors")), (2, 1))
        self.assertEqual(metrics.timings("http.latency")[0], 2)


if __name__ == "__main__":
    unittest.main()
