"""Probes of real-tenacity-async-strategies: what the workspace's tenacity answers (bench/verdict_runner.py).

Fail-to-pass (tenacity 8.4.0, release note "Added the ability to use async functions for retries ... asyncio
coroutines for retry strategy predicates", ported from its tests/test_asyncio.py): the async strategies of
tenacity/asyncio/retry.py (committed in the history, unwired) combine with each other and with the synchronous
strategies through | and & in either order, the combination is an async strategy that AsyncRetrying and @retry
await, evaluated left to right with short-circuit, and `_utils.wrap_to_async_func` (which the module calls) turns a
plain callable into a coroutine function and leaves a coroutine function as it is. Pass-to-pass: synchronous
retrying, stops, waits, statistics and the async retrying of tenacity 8.3.0. Trio support, in the same release, is
left out (no trio in the sandbox; the repository's history does not announce it).
"""

import os
import sys


def _t(ctx, module="tenacity"):
    """A module of the workspace's tenacity (never an installed copy)."""
    root = ctx.path(".")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    ten = ctx.load("tenacity")
    if not os.path.realpath(ten.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("tenacity came from %s, not the workspace" % ten.__file__)
    return ctx.load(module)


def _run(coro):
    import asyncio
    return asyncio.run(coro)


def _attempts(ctx, strategy, fail_when=lambda n: False, limit=8):
    """Attempts AsyncRetrying makes under strategy (at most limit): each attempt's result is its number, and it
    raises ValueError when fail_when(number)."""
    ten = _t(ctx)

    async def go():
        n = 0
        async for attempt in ten.AsyncRetrying(retry=strategy, stop=ten.stop_after_attempt(limit), reraise=True):
            with attempt:
                n += 1
                if fail_when(n):
                    raise ValueError(n)
            if not attempt.retry_state.outcome.failed:
                attempt.retry_state.set_result(n)
        return n

    try:
        return _run(go())
    except Exception as e:  # noqa: BLE001 - which error ended the retrying is the answer
        return {"raised": type(e).__name__}


def _ar(ctx):
    return _t(ctx, "tenacity.asyncio.retry")


async def _lt3(x):
    return x < 3


async def _is_value_error(e):
    return isinstance(e, ValueError)


def probe_async_result(ctx):
    ar = _ar(ctx)
    return [_attempts(ctx, ar.retry_if_result(_lt3)), _attempts(ctx, ar.retry_if_result(_lt3), lambda n: n == 1)]


def probe_async_exception(ctx):
    ar = _ar(ctx)
    return [_attempts(ctx, ar.retry_if_exception(_is_value_error), lambda n: n < 3),
            _attempts(ctx, ar.retry_if_exception(_is_value_error), lambda n: False)]


def probe_async_or_sync(ctx):
    ten, ar = _t(ctx), _ar(ctx)
    strategy = ar.retry_if_result(_lt3) | ten.retry_if_exception(lambda e: isinstance(e, ValueError))
    return _attempts(ctx, strategy, lambda n: 2 < n < 4)


def probe_sync_or_async(ctx):
    ten, ar = _t(ctx), _ar(ctx)
    strategy = ten.retry_if_result(lambda x: x < 3) | ar.retry_if_exception(_is_value_error)
    return [_attempts(ctx, strategy, lambda n: 2 < n < 4), _attempts(ctx, strategy, lambda n: 2 < n < 6)]


def probe_async_and_sync(ctx):
    ten, ar = _t(ctx), _ar(ctx)
    strategy = ar.retry_if_result(_lt3) & ten.retry_if_result(lambda x: x > 0)
    return [_attempts(ctx, strategy), _attempts(ctx, ar.retry_if_result(_lt3) & ten.retry_if_result(lambda x: x > 1))]


def probe_sync_and_async(ctx):
    ten, ar = _t(ctx), _ar(ctx)
    return [_attempts(ctx, ten.retry_if_result(lambda x: x > 0) & ar.retry_if_result(_lt3)),
            _attempts(ctx, ten.retry_if_result(lambda x: x > 1) & ar.retry_if_result(_lt3))]


def probe_combination_types(ctx):
    ten, ar = _t(ctx), _ar(ctx)
    s, a = ten.retry_if_result(lambda x: x), ar.retry_if_result(_lt3)
    out = []
    for combo in (a | s, s | a, a & s, s & a, a | a, s | s, s & s):
        out.append([type(combo).__name__, isinstance(combo, ar.async_retry_base)])
    return out


def probe_evaluation_order(ctx):
    """Which predicates a mixed combination asks, in order, for one outcome (left to right, short-circuit)."""
    ten, ar = _t(ctx), _ar(ctx)
    asked = []

    def sync(name, answer):
        return ten.retry_if_result(lambda x: asked.append(name) or answer)

    def asy(name, answer):
        async def pred(x):
            asked.append(name)
            return answer
        return ar.retry_if_result(pred)

    out = []
    for build in (lambda: sync("s1", True) | asy("a1", True), lambda: asy("a1", False) | sync("s1", True),
                  lambda: sync("s1", False) & asy("a1", True), lambda: asy("a1", True) & sync("s1", False),
                  lambda: sync("s1", False) | asy("a1", False) | sync("s2", True) | asy("a2", True),
                  lambda: sync("s1", True) | sync("s2", True), lambda: sync("s1", False) & sync("s2", True)):
        del asked[:]
        n = _attempts(ctx, build(), limit=2)
        out.append([n, list(asked)])
    return out


def probe_three_way_mix(ctx):
    ten, ar = _t(ctx), _ar(ctx)

    async def is_none(x):
        return x is None

    strategy = ten.retry_if_exception_type(ValueError) | ar.retry_if_result(_lt3) | ten.retry_if_result(lambda x: x == 5)
    return [_attempts(ctx, strategy, lambda n: n == 4, limit=9), _attempts(ctx, strategy, lambda n: n >= 4, limit=9)]


def probe_decorator_with_async_strategy(ctx):
    ten, ar = _t(ctx), _ar(ctx)
    calls = []

    @ten.retry(retry=ar.retry_if_result(_lt3) | ten.retry_if_exception_type(OSError), stop=ten.stop_after_attempt(6))
    async def fetch():
        calls.append(len(calls) + 1)
        if len(calls) == 1:
            raise OSError("first")
        return len(calls)

    got = _run(fetch())
    return [got, calls, fetch.retry.statistics.get("attempt_number")]


def probe_async_strategy_gives_up(ctx):
    ten, ar = _t(ctx), _ar(ctx)

    async def always(x):
        return True

    async def never(x):
        return False

    out = []
    for pred in (always, never):
        @ten.retry(retry=ten.retry_if_result(lambda x: x is None) | ar.retry_if_result(pred),
                   stop=ten.stop_after_attempt(3))
        async def once():
            return 1

        try:
            out.append(["returned", _run(once()), once.retry.statistics.get("attempt_number")])
        except ten.RetryError as e:
            out.append([type(e).__name__, e.last_attempt.attempt_number, e.last_attempt.result()])
    return out


def probe_wrap_to_async_func(ctx):
    utils = _t(ctx, "tenacity._utils")
    inspect = ctx.load("inspect")

    def plain(a, b=2):
        return a * b

    async def already(a):
        return a + 1

    wrapped = utils.wrap_to_async_func(plain)
    return [inspect.iscoroutinefunction(wrapped), _run(wrapped(3)), _run(wrapped(3, b=5)),
            utils.wrap_to_async_func(already) is already, _run(utils.wrap_to_async_func(already)(1))]


def probe_sync_retrying(ctx):
    ten = _t(ctx)
    state = {"n": 0}

    def flaky():
        state["n"] += 1
        if state["n"] < 3:
            raise OSError("again")
        return state["n"]

    r = ten.Retrying(retry=ten.retry_if_exception_type(OSError), stop=ten.stop_after_attempt(5), sleep=lambda s: None)
    got = r(flaky)
    r2 = ten.Retrying(retry=ten.retry_if_result(lambda x: x < 4) | ten.retry_if_exception_type(KeyError),
                      stop=ten.stop_after_attempt(9), sleep=lambda s: None)
    box = {"n": 0}

    def count():
        box["n"] += 1
        return box["n"]

    return [got, r.statistics["attempt_number"], r2(count), type(ten.retry_if_result(bool) & ten.retry_never).__name__]


def probe_sync_gives_up(ctx):
    ten = _t(ctx)
    r = ten.Retrying(stop=ten.stop_after_attempt(2), sleep=lambda s: None)

    def bad():
        raise KeyError("k")

    try:
        r(bad)
    except ten.RetryError as e:
        return [e.last_attempt.attempt_number, type(e.last_attempt.exception()).__name__]
    return "returned"


def probe_waits(ctx):
    ten = _t(ctx)
    out = []
    for n in (1, 2, 3, 4):
        rs = ten.RetryCallState(ten.Retrying(), fn=None, args=(), kwargs={})
        rs.attempt_number = n
        out.append([ten.wait_fixed(2)(rs), ten.wait_exponential(multiplier=1, max=5)(rs),
                    ten.wait_incrementing(start=1, increment=2)(rs), (ten.wait_fixed(1) + ten.wait_fixed(2))(rs)])
    return out


def probe_async_retrying_basics(ctx):
    ten = _t(ctx)
    state = {"n": 0}
    before = []

    async def note(rs):
        before.append(rs.attempt_number)

    @ten.retry(stop=ten.stop_after_attempt(5), before=note)
    async def flaky():
        state["n"] += 1
        if state["n"] < 4:
            raise OSError("again")
        return "ok"

    got = _run(flaky())
    return [got, state["n"], before, hasattr(flaky, "retry_with"), ten.AsyncRetrying.__name__]
