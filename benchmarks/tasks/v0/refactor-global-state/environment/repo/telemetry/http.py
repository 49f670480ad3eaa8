"""Instrumented request handling (a caller of the module-level API)."""

import time

from telemetry import metrics


def handle(request, handler):
    start = time.perf_counter()
    metrics.incr("http.requests")
    try:
        return handler(request)
    except Exception:
        metrics.incr("http.errors")
        raise
    finally:
        metrics.observe("http.latency", time.perf_counter() - start)
