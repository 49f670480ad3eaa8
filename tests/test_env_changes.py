"""What a sandbox changed, read from its own overlay layers: edits, creations, deletions (files and whole
directories), binaries and symlinks skipped, unchanged rewrites ignored, and the same answer after a fork froze the
upper layer into the chain."""

import difflib

import pytest

from composer2_jax.env import Environment, SandboxLimits
from composer2_jax.env import testing as envtest

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")

REPO = {"calc.py": "def f(a, b):\n    return a - b\n", "pkg/keep.py": "X = 1\n", "pkg/gone.txt": "bye\n",
        "old/a.txt": "a\n", "old/deep/b.txt": "b\n", "same.txt": "same\n"}


@pytest.fixture(scope="module")
def env():
    e = Environment(pool_size=1, limits=SandboxLimits(timeout_s=20))
    yield e
    e.shutdown()


def _edit(env, sid):
    """Edit, create, delete a file and a directory, rewrite a file unchanged, add a binary and a symlink."""
    assert env.call(sid, "edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}).ok
    assert env.call(sid, "write_file", {"path": "new/mod.py", "content": "import os\n"}).ok
    assert env.call(sid, "write_file", {"path": "same.txt", "content": "same\n"}).ok
    cmd = ("rm pkg/gone.txt && rm -rf old && printf '\\000\\377' > blob.bin && ln -s /etc/passwd link.txt && "
           "mkdir -p old && echo c > old/c.txt")
    assert env.call(sid, "run_terminal_cmd", {"command": cmd}).ok


EXPECTED_BEFORE = {"calc.py": REPO["calc.py"], "new/mod.py": None, "pkg/gone.txt": "bye\n", "old/a.txt": "a\n",
                   "old/deep/b.txt": "b\n", "old/c.txt": None}
EXPECTED_AFTER = {"calc.py": "def f(a, b):\n    return a + b\n", "new/mod.py": "import os\n", "pkg/gone.txt": None,
                  "old/a.txt": None, "old/deep/b.txt": None, "old/c.txt": "c\n"}


def test_changes_of_a_sandbox_come_from_its_own_layers(env, tmp_path):
    snap = env.import_repo(envtest.make_repo(str(tmp_path / "repo"), REPO))
    sid = env.fork(snap)
    assert env.changes(sid).after == {}
    _edit(env, sid)
    ch = env.changes(sid)
    assert ch.before == EXPECTED_BEFORE and ch.after == EXPECTED_AFTER
    assert set(ch.skipped) == {"blob.bin", "link.txt"}  # a binary and a symlink are named, never read
    kid = env.fork(sid)  # freezes sid's upper layer into its chain: the changes are now in a layer above the origin
    assert env.changes(sid).after == EXPECTED_AFTER and env.changes(kid).after == {}
    env.close(kid)
    env.close(sid)


def test_unified_diff_of_the_changes_matches_difflib(env, tmp_path):
    sid = env.create(envtest.make_repo(str(tmp_path / "repo"), REPO))
    _edit(env, sid)
    diff = env.changes(sid).unified_diff()
    want = "".join(difflib.unified_diff(REPO["calc.py"].splitlines(True), EXPECTED_AFTER["calc.py"].splitlines(True),
                                        "a/calc.py", "b/calc.py"))
    assert want in diff
    assert "--- /dev/null\n+++ b/new/mod.py\n" in diff and "--- a/pkg/gone.txt\n+++ /dev/null\n" in diff
    env.close(sid)


def test_a_symlinked_directory_in_the_changes_is_never_followed(env, tmp_path):
    sid = env.create(envtest.make_repo(str(tmp_path / "repo"), {"x.txt": "x\n"}))
    assert env.call(sid, "run_terminal_cmd", {"command": "ln -s /etc etc && ln -s / root"}).ok
    ch = env.changes(sid)
    assert ch.after == {} and set(ch.skipped) == {"etc", "root"}
    env.close(sid)
