"""Summary statistics."""

import math


def mean(xs):
    if not xs:
        raise ValueError("mean of empty data")
    return math.fsum(xs) / len(xs)


def variance(xs):
    """Population variance."""
    m = mean(xs)
    return math.fsum((x - m) ** 2 for x in xs) / len(xs)


def summarize(xs):
    return {"n": len(xs), "mean": mean(xs), "std": math.sqrt(variance(xs)), "min": min(xs), "max": max(xs)}
