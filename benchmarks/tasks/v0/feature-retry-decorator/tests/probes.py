"""Probes of feature-retry-decorator: calls, sleeps and stats of decorated flaky functions
(bench/verdict_runner.py)."""


class Flaky:
    def __init__(self, failures, exc=ConnectionError):
        self.failures, self.exc, self.calls = failures, exc, 0

    def __call__(self, x=1):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc(f"fail {self.calls}")
        return x * 10


def probe_succeeds_after_failures(ctx):
    retry, slept, f = ctx.load("resilience.retry").retry, [], Flaky(2)
    g = retry(times=3, exceptions=(ConnectionError,), base_delay=0.1, factor=2.0, sleep=slept.append)(f)
    return [g(4), f.calls, slept, g.retry_stats]


def probe_gives_up_with_last_exception(ctx):
    retry, slept, f = ctx.load("resilience.retry").retry, [], Flaky(10)
    g = retry(times=4, exceptions=(ConnectionError,), base_delay=1, factor=3, max_delay=5, sleep=slept.append)(f)
    return [ctx.message(ConnectionError, g), slept, f.calls]


def probe_other_exceptions_propagate_at_once(ctx):
    retry, slept, f = ctx.load("resilience.retry").retry, [], Flaky(1, exc=KeyError)
    g = retry(times=5, exceptions=(ConnectionError,), sleep=slept.append)(f)
    return [ctx.raises(KeyError, g), f.calls, slept]


def probe_subclasses_are_retried(ctx):
    retry, slept = ctx.load("resilience.retry").retry, []
    return retry(times=2, exceptions=(ConnectionError,), sleep=slept.append)(Flaky(1, exc=ConnectionResetError))()


def probe_single_call_and_validation(ctx):
    retry, slept = ctx.load("resilience.retry").retry, []
    g = retry(times=1, exceptions=(ConnectionError,), sleep=slept.append)(Flaky(1))
    return [ctx.raises(ConnectionError, g), slept, ctx.raises(ValueError, retry, times=0)]


def probe_wraps_and_stats_accumulate(ctx):
    retry, slept = ctx.load("resilience.retry").retry, []

    def fetch(x):
        """Docs."""
        return x

    g = retry(times=2, sleep=slept.append)(fetch)
    out = [g.__name__, g.__doc__]
    g(1)
    g(2)
    return out + [g.retry_stats]


def probe_defaults(ctx):
    retry, slept = ctx.load("resilience.retry").retry, []
    return [retry(sleep=slept.append)(Flaky(2, exc=RuntimeError))(), slept]
