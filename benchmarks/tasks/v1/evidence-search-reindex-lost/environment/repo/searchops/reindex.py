"""The reindex job's runs, from its log (docs/indexing.md, "Reindexing")."""

import bisect

from searchops import feeds


class Run:
    """One reindex: the index it built, from which, its pages and how it ended."""

    def __init__(self, index, source, start):
        self.index, self.source, self.start = index, source, start
        self.pages = []  # (ts, first doc, last doc) in the order read
        self.end, self.outcome, self.reason = None, "running", None

    @property
    def duration(self):
        return None if self.end is None else self.end - self.start

    def page_of(self, doc):
        """(ts, first, last) of the page that read doc, or None."""
        firsts = sorted(self.pages, key=lambda p: p[1])
        k = bisect.bisect_right([p[1] for p in firsts], doc) - 1
        if k >= 0 and doc <= firsts[k][2]:
            return firsts[k]
        return None

    def building(self, t):
        """Whether the run was building at t."""
        return self.start <= t and (self.end is None or t < self.end)

    def __repr__(self):
        return "Run(%s from %s, %d pages, %s)" % (self.index, self.source, len(self.pages), self.outcome)


def runs(log_dir):
    """Every run in start order."""
    out, by_index = [], {}
    for ts, verb, fields in feeds.iter_reindex(log_dir):
        if verb == "start":
            r = Run(fields[0], fields[2] if len(fields) > 2 else None, ts)
            by_index[r.index] = r
            out.append(r)
        elif verb == "page" and fields[0] in by_index:
            by_index[fields[0]].pages.append((ts, fields[1], fields[2]))
        elif verb == "swap" and len(fields) == 3 and fields[2] in by_index:
            r = by_index[fields[2]]
            r.end, r.outcome = ts, "swapped"
        elif verb == "abort" and fields[0] in by_index:
            r = by_index[fields[0]]
            r.end, r.outcome, r.reason = ts, "aborted", " ".join(fields[1:]) or None
    return out


def alias_history(log_dir):
    """[(ts, index)] of where the `products` alias pointed, from the first swap on."""
    return [(ts, fields[2]) for ts, verb, fields in feeds.iter_reindex(log_dir) if verb == "swap"]


def pages_per_minute(run):
    """Pages read per minute over the run (None before it ends)."""
    if run.duration is None or run.duration <= 0:
        return None
    return 60.0 * len(run.pages) / run.duration
