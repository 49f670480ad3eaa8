#!/usr/bin/env bash
set -euo pipefail
cat >> resilience/retry.py <<'PY'


def retry(times=3, exceptions=(Exception,), base_delay=0.1, factor=2.0, max_delay=5.0, sleep=time.sleep):
    """See the module docstring."""
    import functools

    if times < 1:
        raise ValueError(f"times must be >= 1, got {times}")
    exceptions = tuple(exceptions) if isinstance(exceptions, (list, tuple)) else (exceptions,)

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for n in range(times):
                if n:
                    sleep(min(max_delay, base_delay * factor ** (n - 1)))
                    wrapper.retry_stats["retries"] += 1
                wrapper.retry_stats["calls"] += 1
                try:
                    return fn(*args, **kwargs)
                except exceptions:
                    if n == times - 1:
                        raise

        wrapper.retry_stats = {"calls": 0, "retries": 0}
        return wrapper

    return decorate
PY
