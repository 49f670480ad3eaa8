"""Probes of real-pyjwt-strict-audience: what the workspace's PyJWT answers (bench/verdict_runner.py).

Fail-to-pass (PyJWT 2.8.0's "Added" items that the history commit announces; the release's own tests ported): the
`strict_aud` decode option (docs/api.rst: the `aud` claim must be a single value, not a list, and match `audience`
exactly), from the call's options and from `PyJWT(options=...)`, through decode() and decode_complete();
`PyJWKClientConnectionError` exported by the package; `PyJWKClient(ssl_context=...)` used for the key set's fetch.
Pass-to-pass: encoding, decoding and the other claim checks (audience lists without strict_aud among them), the
exceptions and the JWKS client's caching and errors as PyJWT 2.7.0 answered them.

Strict refusals are answered by exception type only (the release's messages are not in the docs). The key set is
fetched from a stand-in for urllib.request.urlopen that records the SSL context it is given; no network is used.
"""

import io
import json
import os
import sys
import time


def _jwt(ctx):
    """The workspace's jwt package, never an installed copy."""
    root = ctx.workspace
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("jwt")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("jwt came from %s, not the workspace" % mod.__file__)
    return mod


SECRET = "s3cr3t-key-for-the-probes-0123456789"


def _token(jwt, **claims):
    return jwt.encode({"sub": "u1", **claims}, SECRET, algorithm="HS256")


def _decode(jwt, token, **kw):
    """The decoded payload, or the name of the exception decode raises."""
    kw.setdefault("algorithms", ["HS256"])
    try:
        return jwt.decode(token, SECRET, **kw)
    except Exception as e:  # noqa: BLE001 - which exception is the answer
        return type(e).__name__


def _strict(jwt, aud_claim, audience, **extra):
    token = _token(jwt, aud=aud_claim) if aud_claim is not None else _token(jwt)
    return _decode(jwt, token, audience=audience, options={"strict_aud": True, **extra})


def probe_strict_exact_match_decodes(ctx):
    jwt = _jwt(ctx)
    return [_strict(jwt, "urn:foo", "urn:foo"), _strict(jwt, "https://api.example.com", "https://api.example.com"),
            _strict(jwt, "urn:foo", "urn:foo", verify_exp=True)]


def probe_strict_forbids_list_audience(ctx):
    jwt = _jwt(ctx)
    return [_strict(jwt, "urn:foo", ["urn:foo", "urn:bar"]), _strict(jwt, "urn:foo", ["urn:foo"]),
            _strict(jwt, "urn:foo", ("urn:foo",)), _strict(jwt, "urn:foo", {"urn:foo"})]


def probe_strict_forbids_list_claim(ctx):
    jwt = _jwt(ctx)
    return [_strict(jwt, ["urn:foo", "urn:bar"], "urn:foo"), _strict(jwt, ["urn:foo"], "urn:foo"),
            _strict(jwt, ["urn:bar", "urn:foo"], "urn:foo")]


def probe_strict_mismatch(ctx):
    jwt = _jwt(ctx)
    return [_strict(jwt, "urn:foo", "urn:bar"), _strict(jwt, "urn:foo", "urn:fo"), _strict(jwt, "urn:foo", "URN:FOO"),
            _strict(jwt, "urn:foo", "urn:foo ")]


def probe_strict_error_types(ctx):
    jwt = _jwt(ctx)
    ex = jwt.exceptions
    cases = [("urn:foo", ["urn:foo", "urn:bar"]), (["urn:foo", "urn:bar"], "urn:foo"), ("urn:foo", "urn:bar")]
    out = []
    for claim, audience in cases:
        try:
            jwt.decode(_token(jwt, aud=claim), SECRET, algorithms=["HS256"], audience=audience,
                       options={"strict_aud": True})
            out.append("decoded")
        except ex.InvalidAudienceError as e:
            out.append([type(e).__name__, isinstance(e, ex.InvalidTokenError)])
        except Exception as e:  # noqa: BLE001
            out.append(["other", type(e).__name__])
    return out


def probe_strict_missing_claim_and_no_audience(ctx):
    jwt = _jwt(ctx)
    return [_strict(jwt, None, "urn:foo"), _strict(jwt, "urn:foo", None), _strict(jwt, None, None)]


def probe_strict_off_keeps_list_matching(ctx):
    jwt = _jwt(ctx)
    t1, t2 = _token(jwt, aud="urn:foo"), _token(jwt, aud=["urn:foo", "urn:bar"])
    return [_decode(jwt, t1, audience=["urn:foo", "urn:bar"], options={"strict_aud": False}),
            _decode(jwt, t2, audience="urn:foo", options={"strict_aud": False}),
            _decode(jwt, t2, audience="urn:bar"), _decode(jwt, t1, audience=["urn:x", "urn:foo"])]


def probe_strict_from_instance_options(ctx):
    jwt = _jwt(ctx)
    api = jwt.PyJWT(options={"strict_aud": True})
    t1, t2 = _token(jwt, aud="urn:foo"), _token(jwt, aud=["urn:foo"])
    out = []
    for token, audience in [(t1, "urn:foo"), (t2, "urn:foo"), (t1, ["urn:foo"])]:
        try:
            out.append(api.decode(token, SECRET, algorithms=["HS256"], audience=audience))
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
    try:  # the call's options override the instance's
        out.append(api.decode(t2, SECRET, algorithms=["HS256"], audience="urn:foo", options={"strict_aud": False}))
    except Exception as e:  # noqa: BLE001
        out.append(type(e).__name__)
    return out


def probe_strict_through_decode_complete(ctx):
    jwt = _jwt(ctx)
    out = []
    for claim, audience in [("urn:foo", "urn:foo"), (["urn:foo"], "urn:foo"), ("urn:foo", ["urn:foo"])]:
        try:
            full = jwt.api_jwt.decode_complete(_token(jwt, aud=claim), SECRET, algorithms=["HS256"], audience=audience,
                                       options={"strict_aud": True})
            out.append([full["payload"], full["header"]])
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
    return out


def probe_strict_not_verifying_aud(ctx):
    jwt = _jwt(ctx)
    t = _token(jwt, aud=["urn:foo", "urn:bar"])
    return [_decode(jwt, t, audience="urn:foo", options={"strict_aud": True, "verify_aud": False}),
            _decode(jwt, t, audience="urn:foo", options={"strict_aud": True, "verify_signature": False})]


def probe_connection_error_exported(ctx):
    jwt = _jwt(ctx)
    ex = jwt.exceptions
    cls = getattr(jwt, "PyJWKClientConnectionError", None)
    return [cls is ex.PyJWKClientConnectionError, "PyJWKClientConnectionError" in jwt.__all__,
            issubclass(ex.PyJWKClientConnectionError, jwt.PyJWKClientError)]


class _FakeResponse(io.BytesIO):
    pass


def _with_fake_urlopen(ctx, body, fn, fail=None):
    """fn() with urllib.request.urlopen replaced by a stand-in; (fn's answer, the calls' keyword arguments)."""
    import urllib.error
    import urllib.request
    calls = []

    def fake(req, *args, **kwargs):
        calls.append({"url": getattr(req, "full_url", req), "args": list(args), **kwargs})
        if fail is not None:
            raise urllib.error.URLError(fail)
        return _FakeResponse(json.dumps(body).encode())

    saved = urllib.request.urlopen
    urllib.request.urlopen = fake
    try:
        try:
            answer = fn()
        except Exception as e:  # noqa: BLE001
            answer = [type(e).__name__, str(e)]
    finally:
        urllib.request.urlopen = saved
    return answer, calls


JWKS = {"keys": [{"kty": "oct", "k": "czNjcjN0", "kid": "k1", "alg": "HS256", "use": "sig"},
                 {"kty": "oct", "k": "b3RoZXI", "kid": "k2", "alg": "HS256", "use": "sig"}]}


def _kids(jwk_set):
    return sorted(k.key_id for k in jwk_set.keys)


def probe_ssl_context_used_for_fetch(ctx):
    jwt = _jwt(ctx)
    ssl = ctx.load("ssl")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client = jwt.PyJWKClient("https://keys.example.com/jwks.json", ssl_context=context)
    answer, calls = _with_fake_urlopen(ctx, JWKS, lambda: _kids(client.get_jwk_set()))
    return [answer, len(calls), [c.get("context") is context for c in calls], client.ssl_context is context,
            [c.get("timeout") for c in calls]]


def probe_ssl_context_with_other_arguments(ctx):
    jwt = _jwt(ctx)
    ssl = ctx.load("ssl")
    context = ssl.create_default_context()
    client = jwt.PyJWKClient("https://keys.example.com/jwks.json", cache_keys=True, max_cached_keys=4,
                             cache_jwk_set=True, lifespan=60, headers={"X-Probe": "1"}, timeout=7,
                             ssl_context=context)
    answer, calls = _with_fake_urlopen(ctx, JWKS, lambda: [client.get_signing_key("k2").key_id,
                                                           _kids(client.get_jwk_set())])
    return [answer, len(calls), [c.get("context") is context for c in calls], [c.get("timeout") for c in calls],
            [c["url"] for c in calls]]


def probe_ssl_context_default_none(ctx):
    jwt = _jwt(ctx)
    client = jwt.PyJWKClient("https://keys.example.com/jwks.json")
    answer, calls = _with_fake_urlopen(ctx, JWKS, lambda: _kids(client.get_jwk_set()))
    return [answer, client.ssl_context, [c.get("context") for c in calls]]


def probe_ssl_context_fetch_failure(ctx):
    jwt = _jwt(ctx)
    ssl = ctx.load("ssl")
    client = jwt.PyJWKClient("https://keys.example.com/jwks.json",
                             ssl_context=ssl.SSLContext(protocol=ssl.PROTOCOL_TLS_CLIENT))

    def fetch():
        try:
            client.get_jwk_set()
        except jwt.PyJWKClientConnectionError as e:
            return ["connection", isinstance(e, jwt.PyJWKClientError), str(e)]
        return "fetched"

    answer, calls = _with_fake_urlopen(ctx, JWKS, fetch, fail="certificate verify failed")
    return [answer, len(calls)]


# Pass-to-pass: the surrounding API as PyJWT 2.7.0 answered it.

def probe_encode_decode_roundtrip(ctx):
    jwt = _jwt(ctx)
    token = jwt.encode({"a": 1, "b": [1, "x"], "c": {"d": None}}, SECRET, algorithm="HS256",
                       headers={"kid": "k1"})
    return [token.count("."), jwt.get_unverified_header(token), _decode(jwt, token),
            _decode(jwt, token, algorithms=["HS384"]), jwt.decode(token, options={"verify_signature": False})]


def probe_audience_without_strict(ctx):
    jwt = _jwt(ctx)
    t1, t2 = _token(jwt, aud="urn:foo"), _token(jwt, aud=["urn:foo", "urn:bar"])
    return [_decode(jwt, t1, audience="urn:foo"), _decode(jwt, t1, audience="urn:bar"), _decode(jwt, t1),
            _decode(jwt, _token(jwt), audience="urn:foo"), _decode(jwt, t2, audience=["urn:baz", "urn:bar"]),
            _decode(jwt, _token(jwt, aud=1), audience="urn:foo"), _decode(jwt, _token(jwt, aud=["a", 2]), audience="a")]


def probe_other_claims(ctx):
    jwt = _jwt(ctx)
    now = int(time.time())
    return [_decode(jwt, _token(jwt, exp=now - 100)),
            isinstance(_decode(jwt, _token(jwt, exp=now - 100), leeway=1000), dict),
            _decode(jwt, _token(jwt, nbf=now + 1000)), _decode(jwt, _token(jwt, iss="me"), issuer="you"),
            _decode(jwt, _token(jwt, iss="me"), issuer="me"), _decode(jwt, _token(jwt), options={"require": ["exp"]}),
            _decode(jwt, _token(jwt, iat="x"))]


def probe_exceptions_hierarchy(ctx):
    jwt = _jwt(ctx)
    ex = jwt.exceptions
    names = ["DecodeError", "ExpiredSignatureError", "InvalidAudienceError", "InvalidIssuerError",
             "MissingRequiredClaimError", "PyJWKClientError", "InvalidSignatureError"]
    return [[n, issubclass(getattr(ex, n), ex.PyJWTError), getattr(jwt, n) is getattr(ex, n)] for n in names]


def probe_jwks_client_without_ssl_context(ctx):
    jwt = _jwt(ctx)
    client = jwt.PyJWKClient("https://keys.example.com/jwks.json", cache_jwk_set=True, lifespan=60)

    def use():
        first = _kids(client.get_jwk_set())
        again = _kids(client.get_jwk_set())
        key = client.get_signing_key("k1")
        token = jwt.encode({"x": 1}, key.key, algorithm="HS256", headers={"kid": "k1"})
        from_jwt = client.get_signing_key_from_jwt(token).key_id
        try:
            client.get_signing_key("nope")
            missing = "found"
        except jwt.PyJWKClientError as e:
            missing = str(e)
        return [first, again, from_jwt, missing, jwt.decode(token, key.key, algorithms=["HS256"])]

    answer, calls = _with_fake_urlopen(ctx, JWKS, use)
    return [answer, len(calls), [c.get("timeout") for c in calls]]


def probe_jwks_client_connection_error(ctx):
    jwt = _jwt(ctx)
    client = jwt.PyJWKClient("https://keys.example.com/jwks.json")

    def fetch():
        try:
            client.get_jwk_set()
        except jwt.exceptions.PyJWKClientConnectionError as e:
            return ["connection", str(e)]
        return "fetched"

    answer, calls = _with_fake_urlopen(ctx, JWKS, fetch, fail="timed out")
    return [answer, len(calls)]
