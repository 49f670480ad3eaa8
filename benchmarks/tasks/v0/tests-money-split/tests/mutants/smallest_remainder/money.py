"""Splitting integer amounts of cents without losing or inventing any."""


def split(total, parts):
    """total cents split into `parts` amounts that differ by at most 1 and sum to total.

    The larger amounts come first: split(10, 3) == [4, 3, 3]. Works for negative totals too (the amounts of
    larger magnitude come first: split(-10, 3) == [-4, -3, -3]). parts must be >= 1, else ValueError.
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    sign = -1 if total < 0 else 1
    base, extra = divmod(abs(total), parts)
    return [sign * (base + (1 if i < extra else 0)) for i in range(parts)]


def allocate(total, ratios):
    """total cents allocated in proportion to non-negative ratios, summing exactly to total (total >= 0).

    Each share is floor(total * r / sum) first; the cents left over go one each to the shares with the largest
    fractional remainders, ties going to the earlier share. Ratios must not all be zero (ValueError), nor negative.
    """
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    if any(r < 0 for r in ratios) or not any(ratios):
        raise ValueError(f"ratios must be non-negative and not all zero, got {ratios}")
    whole = sum(ratios)
    shares = [total * r // whole for r in ratios]
    remainders = [total * r % whole for r in ratios]
    left = total - sum(shares)
    for i in sorted(range(len(ratios)), key=lambda i: (remainders[i], i))[:left]:
        shares[i] += 1
    return shares
