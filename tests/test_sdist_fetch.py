"""Pinned releases are fetched as files from the indexes pip is configured for, never built
(bench/authoring/sdist_repo.py).

The fast tests serve a simple index on loopback (PEP 503 HTML and PEP 691 JSON, with basic-auth credentials in the
configured URL) and point pip's own configuration at it through PIP_* variables, so `pip config list` is what the
fetcher reads. The slow test is the fresh-machine truth: every pinned release of suite v1 fetched into an empty
cache from the machine's real configuration, and a rotating sample of the tasks' own generator scripts run on an
empty cache as `bench/task.materialize` runs them.
"""

import base64
import datetime
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading

import pytest

from composer2_jax.bench.authoring import sdist_repo
from composer2_jax.bench.task import load_suite

SDIST = b"\x1f\x8b pretend release bytes"
DIGEST = hashlib.sha256(SDIST).hexdigest()
PIN = {"package": "Demo_Pkg", "version": "1.0", "file": "demo_pkg-1.0.tar.gz", "sha256": DIGEST}


class _Index(http.server.BaseHTTPRequestHandler):
    """/simple/demo-pkg/ (HTML or JSON by Accept) and /files/demo_pkg-1.0.tar.gz, behind basic auth u:p."""

    served = SDIST
    listed_digest = DIGEST
    requests: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).requests.append(self.path)
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"u:p").decode():
            self.send_response(401)
            self.end_headers()
            return
        if self.path == "/simple/demo-pkg/":
            if "json" in self.headers.get("Accept", "") and self.server.json_api:
                body = json.dumps({"meta": {"api-version": "1.0"}, "name": "demo-pkg", "files": [
                    {"filename": PIN["file"], "url": "../../files/" + PIN["file"],
                     "hashes": {"sha256": self.listed_digest}}]}).encode()
                kind = "application/vnd.pypi.simple.v1+json"
            else:
                body = ('<html><body><a href="../../files/%s#sha256=%s">%s</a></body></html>'
                        % (PIN["file"], self.listed_digest, PIN["file"])).encode()
                kind = "text/html"
        elif self.path == "/files/" + PIN["file"]:
            body, kind = self.served, "application/octet-stream"
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(params=["html", "json"])
def index(request, tmp_path, monkeypatch):
    """A loopback index; pip configured to use it alone (PIP_* variables); an empty sdist cache."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    server.json_api = request.param == "json"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = "http://u:p@127.0.0.1:%d/simple/" % server.server_port
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("COMPOSER2_SDIST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_Index, "requests", [])
    yield url
    server.shutdown()
    server.server_close()


def test_the_settings_are_pips_own(index):
    settings = sdist_repo.pip_settings()
    assert sdist_repo.indexes(settings) == [index]
    assert sdist_repo.indexes({}) == [sdist_repo.PYPI]
    assert sdist_repo.indexes({"index-url": "a", "extra-index-url": "b c"}) == ["a", "b", "c"]
    assert sdist_repo.indexes({"no-index": "true", "index-url": "a"}) == []


def test_a_pinned_file_is_fetched_checked_and_cached(index):
    path = sdist_repo.fetch(PIN)
    assert open(path, "rb").read() == SDIST and path.startswith(os.environ["COMPOSER2_SDIST_CACHE"])
    assert _Index.requests == ["/simple/demo-pkg/", "/files/" + PIN["file"]]
    assert sdist_repo.fetch(PIN) == path and len(_Index.requests) == 2  # the cache answers the second time
    assert sorted(os.listdir(os.path.dirname(path))) == [PIN["file"]]  # no partial files left


def test_a_file_that_changed_on_the_index_is_refused(index, monkeypatch):
    monkeypatch.setattr(_Index, "served", b"other bytes")
    monkeypatch.setattr(_Index, "listed_digest", hashlib.sha256(b"other bytes").hexdigest())
    with pytest.raises(ValueError, match=r"Demo_Pkg==1\.0 .*the index http://\*\*\*@127\.0\.0\.1:\d+/simple/ lists"):
        sdist_repo.fetch(PIN)
    monkeypatch.setattr(_Index, "listed_digest", DIGEST)  # listed as pinned, served otherwise
    with pytest.raises(ValueError, match=r"Demo_Pkg==1\.0 .*serves sha256 .*expected the pinned"):
        sdist_repo.fetch(PIN)
    assert os.listdir(os.environ["COMPOSER2_SDIST_CACHE"]) == []  # nothing half-written is kept


def test_a_file_no_index_lists_names_package_version_and_index(index):
    with pytest.raises(RuntimeError, match=r"Demo_Pkg==9\.9 \(demo_pkg-9\.9\.tar\.gz\): no configured index lists "
                                           r"the file \(asked http://\*\*\*@127\.0\.0\.1"):
        sdist_repo.fetch(dict(PIN, version="9.9", file="demo_pkg-9.9.tar.gz"))


def test_wrong_credentials_are_an_error_naming_the_index(index, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", index.replace("u:p@", "u:wrong@"))
    with pytest.raises(RuntimeError, match=r"could not read the index http://\*\*\*@127\.0\.0\.1.*401"):
        sdist_repo.fetch(PIN)


def test_a_file_index_and_find_links_folder(tmp_path, monkeypatch):
    simple = tmp_path / "simple" / "demo-pkg"
    simple.mkdir(parents=True)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / PIN["file"]).write_bytes(SDIST)
    (simple / "index.html").write_text('<a href="../../files/%s#sha256=%s">%s</a>' % (PIN["file"], DIGEST, PIN["file"]))
    monkeypatch.setenv("COMPOSER2_SDIST_CACHE", str(tmp_path / "cache"))
    settings = {"index-url": (tmp_path / "simple").as_uri()}
    assert open(sdist_repo.fetch(PIN, settings), "rb").read() == SDIST
    monkeypatch.setenv("COMPOSER2_SDIST_CACHE", str(tmp_path / "cache2"))
    assert open(sdist_repo.fetch(PIN, {"no-index": "1", "find-links": str(tmp_path / "files")}), "rb").read() == SDIST


# -------------------------------------------------------------------------------------------- fresh-machine truth

V1 = load_suite("v1")
PINNED = [t for t in V1.tasks if (t.repo_source / sdist_repo.PIN).is_file()]
SAMPLE = 3  # generators run whole per CI run; the sample rotates with the day, so a week covers every task


def _rotating_sample(tasks, k, day):
    start = (day * k) % len(tasks)
    return [tasks[(start + i) % len(tasks)] for i in range(k)]


def test_the_sample_rotates_over_every_task():
    names = {t.name for day in range(-(-len(PINNED) // SAMPLE)) for t in _rotating_sample(PINNED, SAMPLE, day)}
    assert names == {t.name for t in PINNED}


@pytest.mark.slow  # reaches the machine's real package index
def test_every_pinned_release_fetches_into_an_empty_cache(tmp_path, monkeypatch):
    """Each v1 pin from the configured indexes into an empty cache; then a rotating sample of whole generators."""
    monkeypatch.setenv("COMPOSER2_SDIST_CACHE", str(tmp_path / "sdists"))
    settings = sdist_repo.pip_settings()
    failed = {}
    for pin in {json.loads((t.repo_source / sdist_repo.PIN).read_text())["file"]: json.loads(
            (t.repo_source / sdist_repo.PIN).read_text()) for t in PINNED}.values():
        try:
            sdist_repo.fetch(pin, settings)
        except (RuntimeError, ValueError) as e:
            failed[pin["file"]] = str(e)
    assert not failed, failed
    # The scripts the tasks ship, run as materialize runs them (python -I, stdlib only), on another empty cache.
    monkeypatch.setenv("COMPOSER2_SDIST_CACHE", str(tmp_path / "sdists-2"))
    history = [t for t in PINNED if t.category != "evidence"]
    for t in _rotating_sample(history, SAMPLE, datetime.date.today().toordinal()):
        repo = tmp_path / t.name
        subprocess.run(["cp", "-a", str(t.repo_source), str(repo)], check=True)
        run = subprocess.run([sys.executable, "-I", str(t.generator), str(repo)], capture_output=True, text=True,
                             timeout=600, check=False)
        assert run.returncode == 0, (t.name, run.stderr[-2000:])
        assert not (repo / sdist_repo.PIN).exists() and (repo / ".git").is_dir(), t.name
