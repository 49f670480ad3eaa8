"""Areas."""


def calc(points):
    """Area of a simple polygon given as [(x, y), ...] in order (shoelace formula); always >= 0."""
    if len(points) < 3:
        return 0.0
    twice = 0.0
    for (x1, y1), (x2, y2) in zip(points, points[1:] + points[:1]):
        twice += x1 * y2 - x2 * y1
    return abs(twice) / 2
