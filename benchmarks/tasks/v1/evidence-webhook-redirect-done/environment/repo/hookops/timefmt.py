"""Times as the exports write them: UTC seconds in the journal and events, ISO 8601 in the workers' logs."""

import datetime

DAY_S = 86400
HOUR_S = 3600


def parse_iso(stamp):
    """UTC seconds of a worker log's time (`2023-12-11T00:00:01.234Z`)."""
    if not stamp.endswith("Z"):
        raise ValueError("not a UTC time: %r" % stamp)
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if "." in stamp else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.datetime.strptime(stamp, fmt).replace(tzinfo=datetime.timezone.utc).timestamp()


def format_iso(seconds):
    """A worker log's time of UTC seconds (milliseconds, Z)."""
    dt = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def day_start(seconds):
    """UTC midnight at or before seconds."""
    return seconds - seconds % DAY_S


def day_name(seconds, start):
    """The exports' day label (`d0`..`d6`) of seconds in the week starting at start."""
    return "d%d" % int((seconds - start) // DAY_S)


def human(seconds):
    """A duration as `3 h 05 min`, `2 min 10 s` or `850 ms`."""
    if seconds < 1:
        return "%d ms" % round(seconds * 1000)
    if seconds < 60:
        return "%.1f s" % seconds
    if seconds < HOUR_S:
        return "%d min %02d s" % divmod(round(seconds), 60)
    h, rest = divmod(round(seconds), HOUR_S)
    return "%d h %02d min" % (h, rest // 60)
