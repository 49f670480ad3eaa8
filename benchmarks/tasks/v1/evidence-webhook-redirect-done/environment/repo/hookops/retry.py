"""The deliverer's retry policy as deployed (docs/delivery.md; deliverer 3.7.0 and later)."""

BACKOFF_S = (30, 120, 600, 1800, 3600, 3 * 3600, 6 * 3600)  # before attempts 2..8
MAX_ATTEMPTS = 8
JITTER = (0.9, 1.2)
RETRIED_4XX = {"408", "409", "429"}
TIMEOUT_S = 10


def classify(status):
    """What the outbox does with an attempt's answer: "delivered", "retry" or "failed"."""
    if status in ("timeout", "refused"):
        return "retry"
    if not status.isdigit():
        raise ValueError("unknown status %r" % status)
    if status.startswith("2"):
        return "delivered"
    if status.startswith("4") and status not in RETRIED_4XX:
        return "failed"
    return "retry"  # 408/409/429, 5xx (a redirect is followed within the attempt: docs/delivery.md)


def next_attempt_after(attempt):
    """(earliest, latest) seconds after a failed attempt number `attempt` (1-based) until the next, or None when the
    delivery is dead after it."""
    if attempt < 1:
        raise ValueError("attempts count from 1")
    if attempt >= MAX_ATTEMPTS:
        return None
    base = BACKOFF_S[attempt - 1]
    return base * JITTER[0], base * JITTER[1]


def give_up_after():
    """(earliest, latest) seconds from the first attempt to the last one of a delivery that dies."""
    lo = sum(b * JITTER[0] for b in BACKOFF_S)
    hi = sum(b * JITTER[1] for b in BACKOFF_S) + MAX_ATTEMPTS * TIMEOUT_S
    return lo, hi


def schedule_gaps(times):
    """Gaps between consecutive scheduled attempts (manual redeliveries excluded by the caller), with whether each
    fits the schedule; [(gap_s, attempt_before, fits)]."""
    out = []
    for k in range(1, len(times)):
        gap = times[k] - times[k - 1]
        window = next_attempt_after(k)
        fits = window is not None and window[0] - 1 <= gap <= window[1] + TIMEOUT_S + 1
        out.append((gap, k, fits))
    return out
