"""Dead-connection detection."""

TIMEOUT_MS = 30_000


class Watchdog:
    """expired(now) is True once more than timeout_ms passed without anything from the server."""

    def __init__(self, timeout_ms=TIMEOUT_MS, start_ms=0):
        self.timeout_ms = timeout_ms
        self.last = start_ms

    def reset(self, now_ms):
        """A (re)connection was opened at now_ms."""
        self.last = now_ms

    def observe(self, event):
        """An event arrived from the server."""
        if event["type"] == "delta":
            self.last = event["ts"]

    def expired(self, now_ms):
        return now_ms - self.last > self.timeout_ms
