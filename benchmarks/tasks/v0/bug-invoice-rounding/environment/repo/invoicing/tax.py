"""Tax helpers."""


def with_tax(net, rate):
    """net × (1 + rate)."""
    return net * (1 + float(rate))
