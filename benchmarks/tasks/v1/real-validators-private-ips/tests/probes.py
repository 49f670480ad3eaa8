"""Probes of real-validators-private-ips: what the workspace's validators answers (bench/verdict_runner.py).

Fail-to-pass (validators 0.27.0, ported from its tests/test_url.py and test_encoding.py, CHANGES.md 0.27.0): base58
and base64 live in a new `validators.encoding` module (still exported at the top level); `private=` on ipv4,
hostname and url (True: only private, link-local, loopback or broadcast IPv4 addresses pass; False: those are
refused -- 0.27.0 also refuses public addresses there, a bug fixed in a later release, so no probe asks for a public
address under False; host names are not IP addresses and are unaffected; None: as before); url accepts irc:// URLs; a first
`validators.uri.uri` (web schemes through url, mailto through email, file:/// paths, ipfs, magnet, tel, data, urn
and urc). Pass-to-pass: the other validators as 0.26.0 answered them. Each answer is True for a pass and "invalid"
for a ValidationError (anything else is shown by type).
"""

import os
import sys


def _v(ctx, module="validators"):
    """A module of the workspace's validators (src layout), never an installed copy."""
    root = ctx.path("src")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    os.environ.pop("RAISE_VALIDATION_ERROR", None)
    v = ctx.load("validators")
    if not os.path.realpath(v.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("validators came from %s, not the workspace" % v.__file__)
    return ctx.load(module)


def _ok(ctx, fn, *args, **kwargs):
    """True, "invalid" (a ValidationError) or what else fn answered or raised."""
    v = _v(ctx)
    try:
        r = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - which error is the answer
        return {"raised": type(e).__name__}
    if r is True:
        return True
    if isinstance(r, v.ValidationError):
        return "invalid"
    return {"returned": type(r).__name__, "truthy": bool(r)}


IPS = ["10.0.0.1", "10.255.1.2", "192.168.1.1", "172.16.5.4", "172.31.255.255", "127.0.0.1", "169.254.1.1",
       "8.8.8.8", "1.1.1.1", "172.32.0.1", "172.15.0.1", "11.0.0.1", "193.168.1.1", "255.255.255.255"]
B58 = ["14pq6y9H2DLGahPsM4s7ugsNSD2uxpHsJx", "cUSECm5YzcXJwP", "3Mch1yLXXEGJK7xLkgNg4QZrXSVqjP1jaQ", "0OIl", "",
       "1BoatSLRHtKNngkdXEeobR76b53LETtpyT", "abc_def"]
B64 = ["SGVsbG8gV29ybGQ=", "U29tZSBkYXRh", "YW55IGNhcm5hbCBwbGVhcw==", "cUSECm5YzcXJwP", "SGVsbG8gV29ybGQ", "",
       "Y2hhcmFjdGVyIHNldA==", "a===", "#$%^"]


def probe_encoding_module(ctx):
    v, enc = _v(ctx), _v(ctx, "validators.encoding")
    return [v.base58 is enc.base58, v.base64 is enc.base64, "base58" in v.__all__, "base64" in v.__all__,
            [_ok(ctx, enc.base58, s) for s in B58], [_ok(ctx, enc.base64, s) for s in B64]]


def probe_top_level_encodings(ctx):
    v = _v(ctx)
    return [[_ok(ctx, v.base58, s) for s in B58], [_ok(ctx, v.base64, s) for s in B64]]


def probe_ipv4_private_true(ctx):
    v = _v(ctx)
    return [_ok(ctx, v.ipv4, ip, private=True) for ip in IPS]


PRIVATE = IPS[:7] + IPS[-1:]  # private, loopback, link-local, broadcast


def probe_ipv4_private_false(ctx):
    """Only addresses that private=False must refuse (0.27.0 also refuses public ones there, a bug fixed later)."""
    v = _v(ctx)
    return [_ok(ctx, v.ipv4, ip, private=False) for ip in PRIVATE] + \
        [_ok(ctx, v.ipv4, ip, private=False) for ip in ("300.1.1.1", "10.0.0")]


def probe_ipv4_private_default(ctx):
    v = _v(ctx)
    return [_ok(ctx, v.ipv4, ip) for ip in IPS] + [_ok(ctx, v.ipv4, ip, private=None) for ip in IPS[:3]]


def probe_ipv4_private_cidr(ctx):
    v = _v(ctx)
    nets = ["10.0.0.0/8", "192.168.0.0/16", "8.8.8.0/24", "127.0.0.1/32"]
    return [[_ok(ctx, v.ipv4, n, private=True) for n in nets], [_ok(ctx, v.ipv4, n, private=False) for n in nets
                                                                 if not n.startswith("8.")]] + \
        [_ok(ctx, v.ipv4, "10.0.0.1/8", private=True, cidr=False), _ok(ctx, v.ipv4, "10.0.0.1", private=True,
                                                                          strict=True)]


def probe_hostname_private(ctx):
    v = _v(ctx)
    hosts = ["10.0.0.1", "192.168.10.10:4010", "8.8.8.8", "8.8.8.8:53", "example.com", "localhost"]
    return [[_ok(ctx, v.hostname, h, private=p) for h in hosts] for p in (True, None)] + \
        [[_ok(ctx, v.hostname, h, private=False) for h in hosts if not h.startswith("8.")]]


def probe_url_private(ctx):
    v = _v(ctx)
    cases = ["http://username:password@10.0.10.1/", "http://username:password@192.168.10.10:4010/",
             "http://127.0.0.1", "http://username:password@127.0.0.1:8080", "http://10.0.10.1",
             "http://255.255.255.255", "https://8.8.8.8/dns", "http://1.1.1.1:8080/x?y=z", "https://example.com/a"]
    public = ("https://8.8.8.8/dns", "http://1.1.1.1:8080/x?y=z")
    return [[_ok(ctx, v.url, u, private=True) for u in cases],
            [_ok(ctx, v.url, u, private=False) for u in cases if u not in public]]


def probe_url_irc(ctx):
    v = _v(ctx)
    return [_ok(ctx, v.url, u) for u in ("irc://irc.libera.chat/python", "irc://irc.example.org:6667/channel",
                                         "http://example.org/irc", "irc:/bad")]


URIS = ["https://example.com/a?b=c", "ftp://ftp.example.org/file.txt", "mailto:someone@example.com",
        "mailto:not-an-email", "file:///etc/hosts", "file:path.txt", "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuyl",
        "magnet:?xt=urn:btih:c12fe1c06bba254a9dc9f519b335aa7c1367a88a", "tel:+1-816-555-1212",
        "data:text/plain;base64,SGVsbG8=", "urn:isbn:0451450523", "nonsense", "", "ssh://git@example.com:22/repo"]


def probe_uri(ctx):
    mod = _v(ctx, "validators.uri")
    return [_ok(ctx, mod.uri, u) for u in URIS]


def probe_hashes_stay(ctx):
    v, h = _v(ctx), _v(ctx, "validators.hashes")
    return [_ok(ctx, h.md5, "d41d8cd98f00b204e9800998ecf8427e"), _ok(ctx, h.md5, "z41d8cd98f00b204e9800998ecf8427e"),
            _ok(ctx, h.sha1, "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            _ok(ctx, h.sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            _ok(ctx, v.sha512, "ab" * 64), _ok(ctx, v.sha224, "ab" * 28), v.md5 is h.md5]


def probe_ip_address_rest(ctx):
    v = _v(ctx)
    return [_ok(ctx, v.ipv4, "127.0.0.1/24"), _ok(ctx, v.ipv4, "127.0.0.1/24", cidr=False),
            _ok(ctx, v.ipv4, "127.0.0.1", strict=True), _ok(ctx, v.ipv4, "900.80.70.11"),
            _ok(ctx, v.ipv4, "1.1.1.1/33"), _ok(ctx, v.ipv6, "::1"), _ok(ctx, v.ipv6, "2001:db8::/32"),
            _ok(ctx, v.ipv6, "abc.0.0.1"), _ok(ctx, v.ipv4, "10.0.0.1/8", host_bit=False)]


def probe_url_rest(ctx):
    v = _v(ctx)
    urls = ["http://foobar.dk", "http://foobar.museum/foobar", "http://127.0.0.1:8080", "http://[::1]:8080",
            "http://username:password@example.com:4010/", "https://exa_mple.com", "http://-invalid.com",
            "http://10.1.1.1", "http://0.0.0.0", "http://foo.bar?q=Spaces should be encoded", "rtmp://a.example/b",
            "http://www.example.com/a%20b", "foo.com", "http://"]
    return [_ok(ctx, v.url, u) for u in urls] + [_ok(ctx, v.url, "http://localhost:8000", simple_host=True)]


def probe_hostname_rest(ctx):
    v = _v(ctx)
    return [_ok(ctx, v.hostname, h) for h in ("example.com", "example.com:8080", "[::1]:65535", "localhost",
                                              "-bad.com", "10.0.0.1:99999", "ex ample.com")] + \
        [_ok(ctx, v.hostname, "10.0.0.1", skip_ipv4_addr=True)]


def probe_error_mechanics(ctx):
    v = _v(ctx)
    bad = v.ipv4("not an ip")
    raised = ctx.raises(v.ValidationError, v.ipv4, "not an ip", r_ve=True)
    return [bool(bad), type(bad).__name__, sorted(bad.__dict__.get("args", {}) or {}), raised]


def probe_other_validators(ctx):
    v = _v(ctx)
    return [_ok(ctx, v.email, "someone@example.com"), _ok(ctx, v.email, "bad@"), _ok(ctx, v.domain, "example.com"),
            _ok(ctx, v.domain, "example"), _ok(ctx, v.between, 5, min_val=1, max_val=9),
            _ok(ctx, v.length, "abc", min_val=4), _ok(ctx, v.slug, "a-b-c"), _ok(ctx, v.slug, "A B"),
            _ok(ctx, v.uuid, "2bc1c94f-0deb-43e9-92a1-4775189ec9f8"), _ok(ctx, v.iban, "DE29100500001061045672"),
            _ok(ctx, v.mac_address, "01:23:45:67:ab:CD"), _ok(ctx, v.btc_address, "3Cwgr2g7vsi1bXDUkpEnVoRLA9w4FZfC69")]
