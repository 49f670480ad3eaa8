"""Half-open time intervals [start, end) given as (start, end) tuples of numbers."""


def merge(intervals):
    """Merge overlapping or touching intervals.

    Input in any order; each interval must have start <= end (else ValueError). Empty intervals (start == end)
    are dropped. Returns a new sorted list of disjoint, non-touching intervals; the input is not modified.
    """
    for start, end in intervals:
        if start > end:
            raise ValueError(f"interval ({start}, {end}) has start > end")
    ordered = sorted((s, e) for s, e in intervals if s < e)
    result = []
    for start, end in ordered:
        if not result or start > result[-1][1]:
            result.append((start, end))
            continue
        last_start, last_end = result.pop()
        result.append((last_start, max(last_end, end)))
    return result


def total_length(intervals):
    """Total time covered by the intervals (overlaps counted once)."""
    return sum(end - start for start, end in merge(intervals))
