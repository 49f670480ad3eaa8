"""Retrying flaky calls.

    @retry(times=3, exceptions=(ConnectionError,), base_delay=0.1, factor=2.0, max_delay=5.0, sleep=time.sleep)
    def fetch(...): ...

`retry(...)` returns a decorator. The decorated function is called; if it raises an exception that is an instance
of one of `exceptions`, it is called again, up to `times` calls in total (times >= 1, else ValueError when the
decorator is created). Before the n-th retry (n = 1, 2, ...) it calls `sleep(min(max_delay, base_delay * factor **
(n - 1)))`; no sleep happens before the first call or after the last failure. When all calls fail, the last
exception is re-raised unchanged. Exceptions not in `exceptions` propagate immediately, without retrying or
sleeping. A successful call returns its value. `functools.wraps` is applied, and the decorated function gets an
attribute `retry_stats`: a dict {"calls": total calls made, "retries": total retries made} accumulated over all
invocations.
"""

import time


def delays(times, base_delay, factor, max_delay):
    """The sleep before each retry, for a call that fails every time."""
    return [min(max_delay, base_delay * factor ** (n - 1)) for n in range(1, times)]
