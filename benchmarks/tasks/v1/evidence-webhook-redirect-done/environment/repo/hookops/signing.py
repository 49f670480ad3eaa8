"""The request signature (docs/signing.md): `Hook-Signature: t=UNIX_SECONDS,v1=HEX[,v1=HEX]`."""

import hashlib
import hmac
import time

TOLERANCE_S = 300


class SignatureError(ValueError):
    """A header that does not verify."""


def sign(secret, body, t):
    """The hex HMAC-SHA256 of "{t}.{body}" (body: bytes)."""
    if isinstance(secret, str):
        secret = secret.encode()
    return hmac.new(secret, b"%d." % int(t) + body, hashlib.sha256).hexdigest()


def header(secrets, body, t):
    """The header value for body at t, one v1= per secret (a rotation signs with both)."""
    if isinstance(secrets, (str, bytes)):
        secrets = [secrets]
    return ",".join(["t=%d" % int(t)] + ["v1=" + sign(s, body, t) for s in secrets])


def parse(value):
    """(t, [signatures]) of a header value."""
    t, sigs = None, []
    for part in value.split(","):
        key, _, val = part.strip().partition("=")
        if key == "t":
            if not val.isdigit():
                raise SignatureError("bad timestamp %r" % val)
            t = int(val)
        elif key == "v1":
            sigs.append(val.lower())
    if t is None or not sigs:
        raise SignatureError("header needs t= and at least one v1=")
    return t, sigs


def verify(secret, body, value, now=None, tolerance=TOLERANCE_S):
    """The header's timestamp when one of its signatures is body's under secret, within tolerance of now."""
    t, sigs = parse(value)
    now = time.time() if now is None else now
    if abs(now - t) > tolerance:
        raise SignatureError("timestamp %d is %d s away from now" % (t, abs(now - t)))
    expected = sign(secret, body, t)
    if not any(hmac.compare_digest(expected, s) for s in sigs):
        raise SignatureError("no signature matches")
    return t
