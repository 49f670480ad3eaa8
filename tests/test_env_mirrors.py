"""The egress proxy's mirror map, per-phase egress and the host's registries: rules, the uv installer, PyPI wheels
repacked offline, apt/pip configuration parsing, and a sandbox that fetches mirrored http and https URLs.

Every server here listens on 127.0.0.1 of this host; mirrored hosts (mirror.test) are answered by the proxy itself and
never resolved; the PyPI target is fed from a local wheel folder (PIP_NO_INDEX), so no test leaves the machine.
"""

import hashlib
import io
import os
import shlex
import subprocess
import tarfile
import zipfile

import pytest

from composer2_jax.env import EgressPolicy, Environment
from composer2_jax.env.mirrors import DEFAULT_MIRRORS, MirrorError, MirrorMap, MirrorRule, uv_installer
from composer2_jax.env.registries import Registries, _pip, apt_uris
from tests.markers import needs_sandbox

FETCH = """
import ssl, sys, urllib.error, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None)
proxy = "http://127.0.0.1:3128"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
                                     urllib.request.HTTPSHandler(context=ctx))
try:
    with opener.open(sys.argv[1], timeout=20) as r:
        body = r.read()
        out = sys.argv[3] if len(sys.argv) > 3 else None
        if out:
            open(out, "wb").write(body)
        print(r.status, body.decode(errors="replace") if not out else len(body))
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except Exception as e:
    print("error", type(e).__name__, e)
"""


# ------------------------------------------------------------------------------------------------------ pure parts


def test_rules_match_fields_and_refuse_bad_targets(tmp_path, monkeypatch):
    rule = MirrorRule("https://astral.sh/uv/{version}/install.sh", builtin="uv-installer")
    assert rule.match("https://astral.sh/uv/0.9.5/install.sh") == {"version": "0.9.5"}
    assert rule.match("https://astral.sh:443/uv/0.9.5/install.sh?x=1") == {"version": "0.9.5"}
    assert rule.match("https://astral.sh/uv/a/b/install.sh") is None  # one path segment per field
    assert rule.match("https://astral.sh/uv/../install.sh") is None and rule.host == ("astral.sh", 443, "https")
    assert rule.match("https://astral.sh/uv/%2e%2e/install.sh") is None  # decoded before the check
    pbs = MirrorRule("https://github.com/astral-sh/python-build-standalone/releases/download/{tag}/{name}", dir="/m")
    assert pbs.match("https://github.com/astral-sh/python-build-standalone/releases/download/20251014/cpython-3.13.9"
                     "%2B20251014-x86_64-unknown-linux-gnu-install_only_stripped.tar.gz")["name"].startswith(
        "cpython-3.13.9+20251014-")
    assert pbs.match("https://github.com/astral-sh/python-build-standalone/releases/download/t/a%2Fb") is None
    with pytest.raises(ValueError, match="exactly one of"):
        MirrorRule("https://x.test/a", file="/a", text="b")
    with pytest.raises(ValueError, match="literal host"):
        MirrorRule("https://{host}/a", text="b")
    with pytest.raises(ValueError, match="unknown builtin"):
        MirrorRule("https://x.test/a", builtin="nope")
    m = MirrorMap.from_dict({"mirrors": [{"url": "http://x.test/f/{name}", "dir": str(tmp_path)},
                                         {"url": "https://x.test/t/{v}", "text": "v={v}\n"}]})
    assert m.rules[2:] == DEFAULT_MIRRORS  # the defaults come after the configured rules
    assert m.intercepts("x.test", 443) and m.intercepts("astral.sh", 443) and not m.intercepts("pypi.org", 443)
    assert not m.intercepts("x.test", 80)  # plain http is answered without interception
    (tmp_path / "blob.bin").write_bytes(b"\0\1")
    art = m.artifact(*m.match("http://x.test/f/blob.bin"))
    assert art.path == str(tmp_path / "blob.bin") and art.size() == 2
    assert m.artifact(*m.match("https://x.test/t/7")).data == b"v=7\n"
    with pytest.raises(MirrorError, match="does not exist"):
        m.artifact(*m.match("http://x.test/f/missing"))
    path = tmp_path / "m.json"
    path.write_text('{"mirrors": [{"url": "https://y.test/a", "text": "a"}], "defaults": false}')
    assert [r.url for r in MirrorMap.from_file(path).rules] == ["https://y.test/a"]
    toml = tmp_path / "m.toml"
    toml.write_text('[[mirrors]]\nurl = "https://z.test/{f}"\ndir = "/srv"\n')
    monkeypatch.setenv("COMPOSER2_MIRRORS", str(toml))
    monkeypatch.setenv("COMPOSER2_MIRROR_CACHE", str(tmp_path / "cache"))
    configured = MirrorMap.configured()  # what an Environment's proxy loads when a phase first turns mirrors on
    assert configured.rules[0].url == "https://z.test/{f}" and configured.rules[1:] == DEFAULT_MIRRORS
    assert configured.cache_dir == tmp_path / "cache"
    monkeypatch.delenv("COMPOSER2_MIRRORS")
    assert MirrorMap.configured().rules == DEFAULT_MIRRORS


def test_uv_installer_fetches_the_release_tarball_and_writes_env():
    pinned, latest = uv_installer("0.9.5"), uv_installer(None)
    assert "https://github.com/astral-sh/uv/releases/download/0.9.5/uv-$target.tar.gz" in pinned
    assert "https://github.com/astral-sh/uv/releases/latest/download/uv-$target.tar.gz" in latest
    assert '$home/.local/bin' in pinned and 'cat > "$dest/env"' in pinned
    assert subprocess.run(["sh", "-n"], input=pinned, text=True).returncode == 0  # valid POSIX sh
    m = MirrorMap()
    for url in ("https://astral.sh/uv/install.sh", "https://astral.sh/uv/0.9.5/install.sh",
                "https://github.com/astral-sh/uv/releases/download/0.9.5/uv-x86_64-unknown-linux-gnu.tar.gz",
                "https://github.com/astral-sh/uv/releases/latest/download/uv-aarch64-unknown-linux-gnu.tar.gz"):
        assert m.match(url) is not None, url


def test_uv_installer_runs_offline_with_the_tarball_the_mirror_serves(tmp_path):
    import platform

    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}[platform.machine()]
    folder = f"uv-{arch}-unknown-linux-gnu"
    tarball = tmp_path / "uv.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        for name in ("uv", "uvx"):
            data = f"#!/bin/sh\necho {name} fake\n".encode()
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size, info.mode = len(data), 0o755
            tf.addfile(info, io.BytesIO(data))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(f'#!/bin/sh\necho "$2" >> {tmp_path}/urls\ncp {tarball} "$4"\n')  # -fsSL URL -o F
    os.chmod(bin_dir / "curl", 0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)}
    r = subprocess.run(["sh"], input=uv_installer("0.9.5"), text=True, capture_output=True, env=env)
    assert r.returncode == 0 and "everything's installed!" in r.stderr, r.stderr
    assert (tmp_path / "urls").read_text() == (f"https://github.com/astral-sh/uv/releases/download/0.9.5/{folder}"
                                               ".tar.gz\n")
    r = subprocess.run(["bash", "-c", "source $HOME/.local/bin/env && uvx"], capture_output=True, text=True, env=env)
    assert r.stdout == "uvx fake\n" and ". \"" + str(home) + '/.local/bin/env"' in (home / ".profile").read_text()
    (home / ".profile").unlink()
    r = subprocess.run(["sh"], input=uv_installer(None), text=True, capture_output=True,
                       env={**env, "UV_UNMANAGED_INSTALL": str(tmp_path / "un")})
    assert r.returncode == 0 and (tmp_path / "un" / "uv").stat().st_mode & 0o777 == 0o755
    assert not (home / ".profile").exists() and "latest/download" in (tmp_path / "urls").read_text()


def _fake_wheel(folder, name="fakeuv", version="1.0"):
    """A wheel with two scripts, like uv's (the binary ships in *.data/scripts/)."""
    path = folder / f"{name}-{version}-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{name}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-"
                                                         "manylinux_2_17_x86_64\n")
        z.writestr(f"{name}-{version}.dist-info/RECORD", "")
        z.writestr(f"{name}-{version}.data/scripts/{name}", "#!/bin/sh\necho main\n")
        z.writestr(f"{name}-{version}.data/scripts/{name}x", "#!/bin/sh\necho x\n")
    return path


def test_pypi_target_repacks_a_wheels_scripts_and_caches_it(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _fake_wheel(wheels)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # the index is this folder: no request leaves the machine
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    rule = MirrorRule("https://m.test/{version}/fakeuv-{target}.tar.gz", pypi="fakeuv=={version}", pack="scripts")
    whole = MirrorRule("https://m.test/{version}/fakeuv.whl", pypi="fakeuv=={version}",
                       platform="manylinux_2_17_x86_64")
    m = MirrorMap([rule, whole], cache_dir=tmp_path / "cache")
    art = m.artifact(*m.match("https://m.test/1.0/fakeuv-x86_64-unknown-linux-gnu.tar.gz"))
    assert art.source == "pypi fakeuv==1.0 (manylinux_2_17_x86_64) scripts"
    with tarfile.open(art.path) as tf:
        members = {i.name: i.mode for i in tf.getmembers()}
        folder = "fakeuv-x86_64-unknown-linux-gnu"
        assert members == {f"{folder}/fakeuv": 0o755, f"{folder}/fakeuvx": 0o755}
        assert tf.extractfile("fakeuv-x86_64-unknown-linux-gnu/fakeuv").read() == b"#!/bin/sh\necho main\n"
    assert m.artifact(*m.match("https://m.test/1.0/fakeuv.whl")).path.endswith(".whl")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a cached artifact ran pip again"))
    assert m.artifact(*m.match("https://m.test/1.0/fakeuv-x86_64-unknown-linux-gnu.tar.gz")).path == art.path
    monkeypatch.undo()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    with pytest.raises(MirrorError, match=r"pip download fakeuv==9\.9 .*failed"):
        m.artifact(*m.match("https://m.test/9.9/fakeuv-x86_64-unknown-linux-gnu.tar.gz"))
    with pytest.raises(MirrorError, match="no wheel platform for target 'sparc-sun-solaris'"):
        m.artifact(*m.match("https://m.test/1.0/fakeuv-sparc-sun-solaris.tar.gz"))


def test_registries_come_from_apt_sources_and_pip_configuration(tmp_path):
    apt = tmp_path / "etc" / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list").write_text("# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://mirror.one/debian bookworm "
                                      "main\ndeb-src http://mirror.two/debian bookworm main\ndeb file:///local ./\n")
    (apt / "sources.list.d" / "x.sources").write_text(
        "Types: deb\nURIs: https://mirror.three/debian\nSuites: bookworm\n\nTypes: deb\nURIs: http://off.example/\n"
        "Enabled: no\nSuites: x\n")
    (apt / "sources.list.d" / "y.list.disabled").write_text("deb http://disabled.example/ x main\n")
    assert apt_uris(str(tmp_path)) == ("http://mirror.one/debian", "http://mirror.two/debian",
                                       "https://mirror.three/debian")
    index, extra, hosts = _pip({"global.extra-index-url": "file:///opt/pypi/simple https://extra.example/simple",
                                "global.find-links": "/opt/wheels"})
    assert index is None and extra == ("https://extra.example/simple",)
    assert "extra.example" in hosts and len(hosts) == 3  # pip's own default index and file host stay reachable
    index, extra, hosts = _pip({":env:.index-url": "https://corp.example:8443/simple", "global.index-url": "x"})
    assert index == "https://corp.example:8443/simple" and hosts == ("corp.example",)  # the default is replaced
    reg = Registries(index, extra, hosts, ("http://mirror.one/debian",), "https://npm.example/")
    policy = reg.policy()
    assert policy.allow_hosts == ("corp.example", "mirror.one", "npm.example") and policy.allow_ports == (80, 443, 8443)
    assert policy.decide("CONNECT", "corp.example", 8443)[0] and not policy.decide("POST", "mirror.one", 80)[0]
    assert not policy.decide("CONNECT", "astral.sh", 443)[0]  # the installer host is mirrored, not reachable


# ------------------------------------------------------------------------------------------------------ sandboxes


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("mirror")
    (d / "big.bin").write_bytes(os.urandom(300_000))
    return d


@pytest.fixture(scope="module")
def env(mirror_dir):
    mirrors = MirrorMap.from_dict({"mirrors": [
        {"url": "http://mirror.test/files/{name}", "dir": str(mirror_dir)},
        {"url": "https://mirror.test/tool/{version}/install.sh", "text": "echo tool {version}\n"}]})
    e = Environment(pool_size=1, mirrors=mirrors)
    yield e
    e.shutdown()


def _fetch(env, sid, url, *args):
    """The sandbox's fetch.py output for url (status and text, or 'error ...')."""
    cmd = "NO_PROXY= no_proxy= " + shlex.join(["python3", "fetch.py", url, *args])
    return env.call(sid, "run_terminal_cmd", {"command": cmd}).fields["stdout"].strip()


@needs_sandbox
def test_phases_decide_egress_and_only_the_verifier_sees_mirrors(env, upstream, mirror_dir):
    sid = env.create(policy=EgressPolicy())  # the agent's allow_internet = false
    env.call(sid, "write_file", {"path": "fetch.py", "content": FETCH})
    env.call(sid, "write_file", {"path": "ca.pem", "content": env.mirror_ca_pem()})
    env.set_phase(sid, "agent")
    assert _fetch(env, sid, "http://mirror.test/files/big.bin").startswith("403 egress denied")
    assert _fetch(env, sid, "https://mirror.test/tool/1.2/install.sh", "ca.pem").startswith("error")
    env.set_phase(sid, "verifier", EgressPolicy(allow_hosts=("127.0.0.1",), allow_ports=(upstream.port,),
                                                allow_private=True), mirrors=True)
    assert _fetch(env, sid, "http://mirror.test/files/big.bin", "", "out.bin") == "200 300000"
    same = env.call(sid, "run_terminal_cmd", {"command": "sha256sum out.bin"}).fields["stdout"].split()[0]
    assert same == hashlib.sha256((mirror_dir / "big.bin").read_bytes()).hexdigest()
    assert _fetch(env, sid, "https://mirror.test/tool/1.2/install.sh", "ca.pem") == "200 echo tool 1.2"
    assert "CERTIFICATE_VERIFY_FAILED" in _fetch(env, sid, "https://mirror.test/tool/1.2/install.sh")  # not trusted
    assert _fetch(env, sid, "https://mirror.test/other", "ca.pem").startswith("404 https://mirror.test/other is not")
    assert _fetch(env, sid, f"http://127.0.0.1:{upstream.port}/up") == "200 hello from upstream /up"  # the policy
    assert _fetch(env, sid, "http://mirror.test/files/missing").startswith("502 mirror http://mirror.test/files/")
    env.set_phase(sid, "agent")
    obs = env.call(sid, "run_terminal_cmd", {"command": "true"})
    assert "network:" not in obs.content  # the verifier's requests never reach the agent's observations
    assert _fetch(env, sid, f"http://127.0.0.1:{upstream.port}/up").startswith("403")  # its own policy again
    events = env.egress_log(sid)
    by_phase = [(e["phase"], e["method"], e["allowed"], e["status"]) for e in events]
    assert by_phase == [
        ("agent", "GET", False, 403), ("agent", "CONNECT", False, 403),
        ("verifier", "GET", True, 200), ("verifier", "CONNECT", True, 200), ("verifier", "GET", True, 200),
        ("verifier", "CONNECT", True, 200),  # the untrusting client hung up during the handshake
        ("verifier", "CONNECT", True, 200), ("verifier", "GET", False, 404),
        ("verifier", "GET", True, 200), ("verifier", "GET", True, 502), ("agent", "GET", False, 403)]
    assert events[2]["reason"] == f"mirrored from file {mirror_dir / 'big.bin'}" and events[2]["bytes_down"] == 300_000
    assert events[4]["reason"] == "mirrored from text" and events[4]["target"] == "https://mirror.test/tool/1.2/" \
                                                                                  "install.sh"
    assert events[8]["reason"] == "allowed by policy"
    env.close(sid)


@needs_sandbox
def test_tunnels_to_hosts_without_mirrored_urls_are_not_intercepted(env, upstream):
    sid = env.create(policy=EgressPolicy(allow_hosts=("127.0.0.1",), allow_ports=(upstream.port,), allow_private=True))
    env.call(sid, "write_file", {"path": "t.py", "content": (
        "import http.client, sys\nc = http.client.HTTPConnection('127.0.0.1', 3128, timeout=10)\n"
        f"c.set_tunnel('127.0.0.1', {upstream.port})\nc.request('GET', '/plain')\nr = c.getresponse()\n"
        "print(r.status, r.read().decode())\n")})
    env.set_phase(sid, "verifier", mirrors=True)  # the sandbox's own policy, mirror on
    out = env.call(sid, "run_terminal_cmd", {"command": "python3 t.py"}).fields["stdout"].strip()
    assert out == "200 hello from upstream /plain"  # bytes passed through: the upstream spoke plain HTTP in the tunnel
    (event,) = env.egress_log(sid)
    assert event["reason"] == "allowed by policy" and event["phase"] == "verifier" and event["bytes_down"] > 0
    env.close(sid)


@pytest.mark.parametrize("backend", ["cryptography", "openssl"])
def test_mirror_ca_signs_certificates_a_client_verifies(tmp_path, backend):
    import socket
    import ssl
    import threading

    from composer2_jax.env.tls import PerRunCA

    ca = PerRunCA(backend=backend)
    assert ca.backend == backend and ca.pem.startswith("-----BEGIN CERTIFICATE-----")
    assert oct(os.stat(ca._dir).st_mode & 0o777) == "0o700"
    server_ctx = ca.server_context("mirror.test")
    assert ca.server_context("MIRROR.test.") is server_ctx  # one leaf per host
    (tmp_path / "ca.pem").write_text(ca.pem)
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    a, b = socket.socketpair()
    done = []
    t = threading.Thread(target=lambda: done.append(server_ctx.wrap_socket(a, server_side=True).recv(5)))
    t.start()
    with client_ctx.wrap_socket(b, server_hostname="mirror.test") as c:
        c.sendall(b"hello")
    t.join(10)
    assert done == [b"hello"]
    a2, b2 = socket.socketpair()
    t = threading.Thread(target=lambda: _swallow(server_ctx, a2))
    t.start()
    with pytest.raises(ssl.SSLCertVerificationError):
        client_ctx.wrap_socket(b2, server_hostname="other.test")  # the leaf names its host only
    t.join(10)
    ca.close()
    assert not os.path.exists(ca._dir)


def _swallow(ctx, sock):
    """Accept a TLS handshake that the client will abort."""
    try:
        ctx.wrap_socket(sock, server_side=True)
    except OSError:
        pass
