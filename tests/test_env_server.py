"""The JSON-over-HTTP server and `EnvironmentClient`: the same API and errors as a local Environment."""

import os
import subprocess
import sys

import pytest

from composer2_jax.env import Environment, EnvironmentClient
from composer2_jax.env import testing as envtest
from composer2_jax.env.server import serve

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def client(upstream):
    cmd = [sys.executable, "-m", "composer2_jax.env.server", "--port", "0", "--pool-size", "1",
           "--allow-host", "127.0.0.1", "--allow-port", str(upstream.port), "--allow-private"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("listening on http://127.0.0.1:"), line
    yield EnvironmentClient(line.split()[-1])
    proc.terminate()
    assert proc.wait(timeout=30) == 0


def test_remote_episode_end_to_end(client, upstream, tmp_path):
    repo = envtest.make_repo(str(tmp_path), {"a.txt": "one\n"})
    assert [t["function"]["name"] for t in client.tools()] == [t["function"]["name"] for t in Environment.tools()]
    sid = client.create(repo)
    obs = client.call(sid, "run_terminal_cmd", '{"command": "cat a.txt"}')
    assert obs.ok and obs.fields["stdout"] == "one\n"
    snap = client.snapshot(sid)
    kid = client.fork(snap)
    client.call(kid, "write_file", {"path": "a.txt", "content": "two\n"})
    changes = client.changes(kid)  # read from the fork's own layers, over HTTP
    assert (changes.before, changes.after) == ({"a.txt": "one\n"}, {"a.txt": "two\n"})
    assert client.call(sid, "read_file", {"path": "a.txt"}).content == "one\n"
    client.call(sid, "write_file", {"path": "a.txt", "content": "three\n"})
    client.restore(sid, snap)
    assert client.call(sid, "read_file", {"path": "a.txt"}).content == "one\n"
    client.call(sid, "todo_write", {"todos": [{"id": "1", "content": "x", "status": "pending"}]})
    assert client.todos(sid) == [{"id": "1", "content": "x", "status": "pending"}]
    fetch = f"NO_PROXY= no_proxy= python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{upstream.port}/r').status)\""
    assert client.call(sid, "run_terminal_cmd", {"command": fetch}).fields["stdout"] == "200\n"
    assert client.egress_log(sid)[-1]["status"] == 200
    assert set(client.sandboxes()) >= {sid, kid}
    assert client.close(kid)["calls"] == 1
    assert client.close(sid)["todos"][0]["id"] == "1"


def test_remote_errors_match_local_ones(client):
    with pytest.raises(KeyError, match="sbx-missing"):
        client.snapshot("sbx-missing")
    with pytest.raises(NotADirectoryError):
        client.create("/definitely/not/a/dir")
    assert client.call("sbx-missing", "list_dir", {}).error == "unknown_sandbox"
    sid = client.create()
    assert client.call(sid, "read_file", "{oops").error == "bad_json"
    client.close(sid)


def test_token_is_required_when_configured():
    with Environment(pool_size=0) as env:
        server = serve(env, token="s3cret")
        url = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            with pytest.raises(PermissionError):
                EnvironmentClient(url, token="wrong").sandboxes()
            assert EnvironmentClient(url, token="s3cret").sandboxes() == []
        finally:
            server.shutdown()
            server.server_close()


def test_remote_checkpoint_fork_keeps_origin_and_episode_state(client, tmp_path):
    repo = envtest.make_repo(str(tmp_path), {"a.txt": "one\n"})
    sid = client.create(repo)
    client.call(sid, "write_file", {"path": "a.txt", "content": "two\n"})
    client.call(sid, "todo_write", {"todos": [{"id": "1", "content": "x", "status": "in_progress"}]})
    snap, state = client.snapshot(sid), client.episode(sid)
    kid = client.fork(snap, keep_origin=True)
    client.set_episode(kid, state)
    assert client.episode(kid) == state and client.todos(kid)[0]["status"] == "in_progress"
    client.call(kid, "write_file", {"path": "b.txt", "content": "new\n"})
    changes = client.changes(kid)  # counted from the parent's start, not from the snapshot
    assert (changes.before, changes.after) == ({"a.txt": "one\n", "b.txt": None}, {"a.txt": "two\n", "b.txt": "new\n"})
    with pytest.raises(ValueError, match="expected exactly"):
        client.set_episode(kid, {"todos": []})
    client.close(kid)
    client.close(sid)
    client.delete_snapshot(snap)
