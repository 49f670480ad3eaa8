import unittest

from resilience.retry import retry


class Flaky:
    def __init__(self, failures, exc=ConnectionError):
        self.failures, self.exc, self.calls = failures, exc, 0

    def __call__(self, x=1):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc(f"fail {self.calls}")
        return x * 10


class HiddenRetryTest(unittest.TestCase):
    def setUp(self):
        self.slept = []

    def deco(self, **kw):
        kw.setdefault("sleep", self.slept.append)
        return retry(**kw)

    def test_succeeds_after_failures(self):
        f = Flaky(2)
        g = self.deco(times=3, exceptions=(ConnectionError,), base_delay=0.1, factor=2.0)(f)
        self.assertEqual(g(4), 40)
        self.assertEqual(f.calls, 3)
        self.assertEqual(self.slept, [0.1, 0.2])
        self.assertEqual(g.retry_stats, {"calls": 3, "retries": 2})

    def test_gives_up_with_last_exception(self):
        f = Flaky(10)
        g = self.deco(times=4, exceptions=(ConnectionError,), base_delay=1, factor=3, max_delay=5)(f)
        with self.assertRaisesRegex(ConnectionError, "fail 4"):
            g()
        self.assertEqual(self.slept, [1, 3, 5])
        self.assertEqual(f.calls, 4)

    def test_other_exceptions_propagate_at_once(self):
        f = Flaky(1, exc=KeyError)
        g = self.deco(times=5, exceptions=(ConnectionError,))(f)
        with self.assertRaises(KeyError):
            g()
        self.assertEqual((f.calls, self.slept), (1, []))

    def test_subclasses_are_retried(self):
        f = Flaky(1, exc=ConnectionResetError)
        self.assertEqual(self.deco(times=2, exceptions=(ConnectionError,))(f)(), 10)

    def test_single_call_and_validation(self):
        f = Flaky(1)
        with self.assertRaises(ConnectionError):
            self.deco(times=1, exceptions=(ConnectionError,))(f)()
        self.assertEqual(self.slept, [])
        with self.assertRaises(ValueError):
            retry(times=0)

    def test_wraps_and_stats_accumulate(self):
        def fetch(x):
            """Docs."""
            return x

        g = self.deco(times=2)(fetch)
        self.assertEqual((g.__name__, g.__doc__), ("fetch", "Docs."))
        g(1)
        g(2)
        self.assertEqual(g.retry_stats, {"calls": 2, "retries": 0})

    def test_defaults(self):
        f = Flaky(2, exc=RuntimeError)
        self.assertEqual(retry(sleep=self.slept.append)(f)(), 10)
        self.assertEqual(self.slept, [0.1, 0.2])


if __name__ == "__main__":
    unittest.main()
