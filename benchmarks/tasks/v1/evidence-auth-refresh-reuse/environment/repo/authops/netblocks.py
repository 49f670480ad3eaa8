"""Addresses by network block: a phone moving between cell towers changes its address, rarely its /16."""

import ipaddress


def block(ip, prefix=24):
    """The address's network (IPv4 /prefix, IPv6 /48 when prefix is 24) as text; None for something else."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return None
    if addr.version == 6:
        prefix = 48 if prefix == 24 else prefix
    return str(ipaddress.ip_network("%s/%d" % (addr, prefix), strict=False))


def same_block(a, b, prefix=24):
    """Whether two addresses share a block (False when either is not an address)."""
    x, y = block(a, prefix), block(b, prefix)
    return x is not None and x == y


def is_private(ip):
    try:
        return ipaddress.ip_address(ip).is_private
    except ValueError:
        return False
