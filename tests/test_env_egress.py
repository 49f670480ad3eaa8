"""Egress through the in-sandbox bridge and the host proxy: policy, forwarding, CONNECT tunnels, the log.

Every server here listens on 127.0.0.1 of this host; no test talks to any other address (denied hosts are
refused by name, before any DNS lookup or connection).
"""

import pytest

from composer2_jax.env import EgressPolicy, Environment
from composer2_jax.env import testing as envtest

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")

FETCH = """
import sys, urllib.request, urllib.error
method, url = sys.argv[1], sys.argv[2]
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
try:
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method), timeout=10) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
"""

TUNNEL = """
import http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", 3128, timeout=10)
conn.set_tunnel("127.0.0.1", int(sys.argv[1]))
try:
    conn.request("GET", "/through-tunnel")
    r = conn.getresponse()
    print(r.status, r.read().decode())
except OSError as e:
    print("tunnel refused:", e)
"""


@pytest.fixture(scope="module")
def env():
    e = Environment(pool_size=1)
    yield e
    e.shutdown()


def allow(upstream, **kw):
    """A policy that lets sandboxes reach the loopback upstream."""
    return EgressPolicy(**{"allow_hosts": ("127.0.0.1",), "allow_ports": (upstream.port,), "allow_private": True, **kw})


def sandbox(env, policy):
    """A sandbox with the fetch helpers in its workspace."""
    sid = env.create(policy=policy)
    env.call(sid, "write_file", {"path": "fetch.py", "content": FETCH})
    env.call(sid, "write_file", {"path": "tunnel.py", "content": TUNNEL})
    return sid


def fetch(env, sid, method, url, body=None):
    """(status, text) of a request made inside the sandbox through HTTP_PROXY."""
    cmd = f"NO_PROXY= no_proxy= python3 fetch.py {method} {url}" + (f" '{body}'" if body else "")
    status, _, text = env.call(sid, "run_terminal_cmd", {"command": cmd}).fields["stdout"].strip().partition(" ")
    return int(status), text


def test_policy_decides_by_method_port_and_host_pattern():
    p = EgressPolicy(allow_hosts=("pypi.org", "*.pythonhosted.org"), allow_ports=(443,))
    assert p.decide("CONNECT", "files.pythonhosted.org", 443) == (True, "allowed by policy")
    assert p.decide("CONNECT", "PyPI.org.", 443)[0]
    assert p.decide("CONNECT", "evil.org", 443) == (False, "host evil.org is not in the allow list")
    assert "port 80" in p.decide("GET", "pypi.org", 80)[1]
    assert "method POST" in p.decide("POST", "pypi.org", 443)[1]
    assert not EgressPolicy().decide("GET", "anything", 80)[0]  # deny by default
    with pytest.raises(ValueError, match="allow_ports"):
        EgressPolicy(allow_ports=(0,))


def test_policy_refuses_private_addresses_unless_allowed():
    assert EgressPolicy().resolve("127.0.0.1", 80) == (None, "host 127.0.0.1 resolves to non-public address 127.0.0.1")
    assert EgressPolicy(allow_private=True).resolve("127.0.0.1", 80)[0] == "127.0.0.1"


def test_allowed_get_is_forwarded_and_logged(env, upstream):
    sid = sandbox(env, allow(upstream))
    assert fetch(env, sid, "GET", f"http://127.0.0.1:{upstream.port}/hi?x=1") == (200, "hello from upstream /hi?x=1")
    assert ("GET", "/hi?x=1") in upstream.seen
    (event,) = env.egress_log(sid)
    assert event["allowed"] and event["status"] == 200 and event["host"] == "127.0.0.1"
    assert event["bytes_down"] == len("hello from upstream /hi?x=1")
    assert event["summary"].startswith(f"ALLOWED GET http://127.0.0.1:{upstream.port}/hi?x=1 -> 200")
    env.close(sid)


def test_method_not_allowed_is_denied_and_logged(env, upstream):
    sid = sandbox(env, allow(upstream))
    before = len(upstream.seen)
    status, text = fetch(env, sid, "POST", f"http://127.0.0.1:{upstream.port}/post", "data")
    assert status == 403 and "method POST is not allowed" in text
    assert len(upstream.seen) == before
    assert env.egress_log(sid)[-1]["summary"].startswith("DENIED POST")
    env.close(sid)


def test_post_body_is_forwarded_when_allowed(env, upstream):
    sid = sandbox(env, allow(upstream, allow_methods=("POST",)))
    assert fetch(env, sid, "POST", f"http://127.0.0.1:{upstream.port}/echo", "payload-123") == (200, "payload-123")
    assert env.egress_log(sid)[-1]["bytes_up"] == len("payload-123")
    env.close(sid)


def test_disallowed_host_is_denied_by_name(env, upstream):
    sid = sandbox(env, allow(upstream))
    status, text = fetch(env, sid, "GET", f"http://blocked.invalid:{upstream.port}/x")
    assert status == 403 and "blocked.invalid is not in the allow list" in text
    assert env.egress_log(sid, since=0)[-1]["allowed"] is False
    env.close(sid)


def test_private_upstream_is_denied_by_default(env, upstream):
    sid = sandbox(env, allow(upstream, allow_private=False))
    before = len(upstream.seen)
    status, text = fetch(env, sid, "GET", f"http://127.0.0.1:{upstream.port}/")
    assert status == 403 and "non-public address" in text and len(upstream.seen) == before
    env.close(sid)


def test_connect_tunnel_carries_bytes_without_interception(env, upstream):
    sid = sandbox(env, allow(upstream))
    obs = env.call(sid, "run_terminal_cmd", {"command": f"python3 tunnel.py {upstream.port}"})
    assert obs.fields["stdout"].strip() == "200 hello from upstream /through-tunnel"
    (event,) = env.egress_log(sid)
    assert event["method"] == "CONNECT" and event["status"] == 200 and event["bytes_up"] > 0 and event["bytes_down"] > 0
    env.close(sid)


def test_connect_to_disallowed_port_is_denied(env, upstream):
    sid = sandbox(env, allow(upstream))
    obs = env.call(sid, "run_terminal_cmd", {"command": "python3 tunnel.py 22"})
    assert "tunnel refused" in obs.fields["stdout"] and "403" in obs.fields["stdout"]
    assert env.egress_log(sid)[-1]["summary"].startswith("DENIED CONNECT 127.0.0.1:22")
    env.close(sid)


def test_non_proxy_requests_are_rejected_and_logged(env, upstream):
    sid = sandbox(env, allow(upstream))
    raw = ("import socket; s = socket.create_connection(('127.0.0.1', 3128)); "
           "s.sendall(b'GET /direct HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n'); "
           "print(s.recv(100).split()[1].decode())")
    assert env.call(sid, "run_terminal_cmd", {"command": f'python3 -c "{raw}"'}).fields["stdout"] == "400\n"
    assert "not a proxy request" in env.egress_log(sid)[-1]["reason"]
    env.close(sid)


def test_requests_of_a_tool_call_are_appended_to_its_observation(env, upstream):
    sid = sandbox(env, allow(upstream))
    url = f"http://127.0.0.1:{upstream.port}/obs"
    cmd = (f"NO_PROXY= no_proxy= python3 fetch.py GET {url}; NO_PROXY= no_proxy= python3 fetch.py POST {url} x; "
           f"NO_PROXY= no_proxy= python3 fetch.py GET http://denied.example:{upstream.port}/pkg")
    obs = env.call(sid, "run_terminal_cmd", {"command": cmd})
    lines = [line for line in obs.content.splitlines() if line.startswith("network: ")]
    assert lines == [f"network: ALLOWED GET {url} -> 200 (allowed by policy)",
                     (f"network: DENIED POST {url} -> 403 (method POST is not allowed (allowed: GET, HEAD, OPTIONS, "
                      "CONNECT))"),
                     (f"network: DENIED GET http://denied.example:{upstream.port}/pkg -> 403 (host denied.example is "
                      "not in the allow list)")]
    assert [(e["allowed"], e["host"], e["method"], e["status"]) for e in obs.fields["egress"]] == [
        (True, "127.0.0.1", "GET", 200), (False, "127.0.0.1", "POST", 403), (False, "denied.example", "GET", 403)]
    quiet = env.call(sid, "read_file", {"path": "fetch.py"})  # requests are shown once, with the call that made them
    assert "network:" not in quiet.content and "egress" not in quiet.fields
    assert len(env.egress_log(sid)) == 3
    env.close(sid)


def test_a_socket_path_too_long_for_unix_is_refused_by_name(tmp_path):
    from composer2_jax.env.egress import MAX_SOCKET_PATH, EgressProxy

    deep = tmp_path / ("d" * (MAX_SOCKET_PATH - len(str(tmp_path))))
    proxy = EgressProxy()
    with pytest.raises(ValueError, match=r"egress socket path '.*dddd/e\.sock' is \d+ bytes; .* at most 107"):
        proxy.add("s", str(deep / "e.sock"), EgressPolicy(), 0, 0)
