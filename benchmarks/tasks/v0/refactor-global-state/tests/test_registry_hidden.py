import ast
import subprocess
import sys
import unittest

from telemetry import http, metrics


class HiddenRegistryTest(unittest.TestCase):
    def setUp(self):
        metrics.reset()

    def test_instances_are_independent(self):
        a, b = metrics.Registry(), metrics.Registry()
        self.assertEqual(a.incr("x"), 1)
        self.assertEqual(a.incr("x", 4), 5)
        self.assertEqual(b.get("x"), 0)
        b.observe("t", 0.5)
        b.observe("t", 1.5)
        self.assertEqual(b.timings("t"), (2, 2.0, 1.5))
        self.assertEqual(a.timings("t"), (0, 0, 0.0))
        self.assertEqual(metrics.get("x"), 0)
        with self.assertRaises(ValueError):
            a.observe("t", -1)

    def test_snapshot_is_a_copy_and_reset(self):
        r = metrics.Registry()
        r.incr("c")
        r.observe("t", 1)
        snap = r.snapshot()
        snap["timings"]["t"].append(9)
        self.assertEqual(r.snapshot(), {"counters": {"c": 1}, "timings": {"t": [1.0]}})
        r.reset()
        self.assertEqual(r.snapshot(), {"counters": {}, "timings": {}})

    def test_module_functions_use_default(self):
        self.assertIsInstance(metrics.DEFAULT, metrics.Registry)
        metrics.incr("m", 2)
        metrics.observe("lat", 0.25)
        self.assertEqual(metrics.DEFAULT.get("m"), 2)
        self.assertEqual(metrics.timings("lat"), (1, 0.25, 0.25))
        http.handle({}, lambda r: "ok")
        self.assertEqual(metrics.DEFAULT.get("http.requests"), 1)
        self.assertEqual(metrics.snapshot()["counters"], {"m": 2, "http.requests": 1})
        metrics.reset()
        self.assertEqual(metrics.get("m"), 0)

    def test_no_globals(self):
        tree = ast.parse(open("telemetry/metrics.py").read())
        self.assertFalse([n for n in ast.walk(tree) if isinstance(n, ast.Global)])

    def test_visible_tests_pass(self):
        run = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()
