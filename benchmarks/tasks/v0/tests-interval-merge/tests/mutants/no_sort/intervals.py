"""Half-open time intervals [start, end) given as (start, end) tuples of numbers."""


def merge(intervals):
    """Merge overlapping or touching intervals.

    Input in any order; each interval must have start <= end (else ValueError). Empty intervals (start == end)
    are dropped. Returns a new sorted list of disjoint, non-touching intervals; the input is not modified.
    """
    for start, end in intervals:
        if start > end:
            raise ValueError(f"interval ({start}, {end}) has start > end")
    ordered = [(s, e) for s, e in intervals if s < e]
    merged = []
    for start, end in ordered:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals):
    """Total time covered by the intervals (overlaps counted once)."""
    return sum(end - start for start, end in merge(intervals))
