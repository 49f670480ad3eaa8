"""The tool-call RPC on a real sandbox: schemas, each tool's behaviour, and structured errors for bad calls."""

import json

import jsonschema
import pytest

from composer2_jax.env import (
    TODO_STATUSES,
    TOOL_NAMES,
    Environment,
    Observation,
    SandboxLimits,
)
from composer2_jax.env import testing as envtest

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")


@pytest.fixture(scope="module")
def env():
    e = Environment(pool_size=1, limits=SandboxLimits(read_bytes=200, grep_timeout_s=1.0, timeout_s=20))
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def sid(env, tmp_path_factory):
    lines = "".join(f"line {i}\n" for i in range(1, 11))
    repo = envtest.make_repo(str(tmp_path_factory.mktemp("repo")), {
        "ten.txt": lines, "pkg/mod.py": "def f():\n    return 1\n\ndef g():\n    return 1\n",
        "pkg/other.txt": "Needle here\n", "big.txt": "x" * 50 + "\n" + "y" * 500 + "\n",
    })
    return env.create(repo)


def test_specs_are_openai_function_tools():
    specs = Environment.tools()
    assert [s["function"]["name"] for s in specs] == list(TOOL_NAMES)
    for spec in specs:
        assert spec["type"] == "function" and spec["function"]["description"]
        params = spec["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert params["type"] == "object" and params["additionalProperties"] is False
    todo = next(s for s in specs if s["function"]["name"] == "todo_write")["function"]["parameters"]
    assert todo["properties"]["todos"]["items"]["properties"]["status"]["enum"] == list(TODO_STATUSES)
    assert json.loads(json.dumps(specs)) == specs


def test_read_file_line_ranges(env, sid):
    obs = env.call(sid, "read_file", {"path": "ten.txt", "start_line": 3, "end_line": 4})
    assert obs.ok and obs.content.startswith("line 3\nline 4\n") and "[lines 3-4 of 10]" in obs.content
    assert (obs.fields["start_line"], obs.fields["end_line"], obs.fields["total_lines"]) == (3, 4, 10)
    whole = env.call(sid, "read_file", {"path": "/workspace/ten.txt"})
    assert whole.content == "".join(f"line {i}\n" for i in range(1, 11))
    assert env.call(sid, "read_file", {"path": "ten.txt", "start_line": 11}).error == "out_of_range"


def test_read_file_truncates_at_read_bytes(env, sid):
    obs = env.call(sid, "read_file", {"path": "big.txt"})
    assert obs.ok and obs.fields["truncated"] and obs.fields["end_line"] == 1 and "truncated]" in obs.content


def test_read_file_errors(env, sid):
    assert env.call(sid, "read_file", {"path": "nope.txt"}).error == "not_found"
    assert env.call(sid, "read_file", {"path": "pkg"}).error == "is_directory"
    env.call(sid, "run_terminal_cmd", {"command": "head -c 100 /dev/zero > zero.bin; truncate -s 200M sparse.txt"})
    assert env.call(sid, "read_file", {"path": "zero.bin"}).error == "binary_file"
    assert env.call(sid, "read_file", {"path": "sparse.txt"}).error == "too_large"  # never read whole into the guest


def test_write_file_creates_parents(env, sid):
    obs = env.call(sid, "write_file", {"path": "new/deep/x.txt", "content": "héllo\n"})
    assert obs.ok and obs.fields == {"path": "new/deep/x.txt", "bytes": 7, "created": True}
    assert env.call(sid, "read_file", {"path": "new/deep/x.txt"}).content == "héllo\n"
    assert env.call(sid, "write_file", {"path": "new/deep/x.txt", "content": ""}).fields["created"] is False
    assert env.call(sid, "write_file", {"path": "pkg", "content": "x"}).error == "is_directory"


def test_edit_file_must_match_once(env, sid):
    assert env.call(sid, "edit_file", {"path": "pkg/mod.py", "old_string": "return 1",
                                       "new_string": "return 2"}).error == "multiple_matches"
    assert env.call(sid, "edit_file", {"path": "pkg/mod.py", "old_string": "return 3",
                                       "new_string": "x"}).error == "no_match"
    obs = env.call(sid, "edit_file", {"path": "pkg/mod.py", "old_string": "def g():\n    return 1",
                                      "new_string": "def g():\n    return 2"})
    assert obs.ok and obs.fields["line"] == 4
    assert env.call(sid, "read_file", {"path": "pkg/mod.py"}).content.endswith("return 2\n")


def test_list_dir(env, sid):
    obs = env.call(sid, "list_dir", {"path": "pkg"})
    assert obs.ok and {e["name"]: e["type"] for e in obs.fields["entries"]} == {"mod.py": "file", "other.txt": "file"}
    assert "pkg/" in env.call(sid, "list_dir", {}).content
    assert env.call(sid, "list_dir", {"path": "ten.txt"}).error == "not_a_directory"


def test_grep(env, sid):
    obs = env.call(sid, "grep", {"pattern": r"needle", "ignore_case": True})
    assert obs.ok and obs.fields["matches"] == [{"path": "pkg/other.txt", "line": 1, "text": "Needle here"}]
    assert env.call(sid, "grep", {"pattern": "return", "glob": "*.py"}).content.count("pkg/mod.py:") == 2
    assert env.call(sid, "grep", {"pattern": "needle"}).content == "(no matches)"
    assert env.call(sid, "grep", {"pattern": "("}).error == "invalid_arguments"


def test_grep_catastrophic_regex_is_time_bounded(env, sid):
    env.call(sid, "write_file", {"path": "redos.txt", "content": "a" * 40 + "!\n"})
    obs = env.call(sid, "grep", {"pattern": r"^(a+)+$", "path": "redos.txt"})
    assert obs.error == "timeout"
    assert env.call(sid, "list_dir", {}).ok  # the guest is free again


def test_run_terminal_cmd(env, sid):
    obs = env.call(sid, "run_terminal_cmd", {"command": "pwd; echo oops >&2; exit 3", "cwd": "pkg"})
    assert obs.ok and obs.fields["exit_code"] == 3
    assert obs.fields["stdout"] == "/workspace/pkg\n" and obs.fields["stderr"] == "oops\n"
    assert obs.content.startswith("exit code 3\nstdout:\n/workspace/pkg\n")
    slow = env.call(sid, "run_terminal_cmd", {"command": "sleep 5", "timeout": 0.5})
    assert slow.error == "timeout" and slow.fields["wall_s"] < 3
    assert env.call(sid, "run_terminal_cmd", {"command": "true", "cwd": "ten.txt"}).error == "not_a_directory"


def test_todo_write_replace_and_merge(env, sid):
    first = [{"id": "1", "content": "read code", "status": "done"},
             {"id": "2", "content": "fix bug", "status": "in_progress"}]
    obs = env.call(sid, "todo_write", {"todos": first})
    assert obs.ok and obs.content == "[x] 1. read code\n[~] 2. fix bug"
    env.call(sid, "todo_write", {"todos": [{"id": "2", "content": "fix bug", "status": "done"},
                                           {"id": "3", "content": "run tests", "status": "pending"}], "merge": True})
    assert [t["status"] for t in env.todos(sid)] == ["done", "done", "pending"]
    assert env.call(sid, "todo_write", {"todos": [{"id": "1", "content": "x", "status": "finished"}]}).error \
        == "invalid_arguments"
    assert env.call(sid, "todo_write", {"todos": first + first}).error == "invalid_arguments"
    history = env.episode(sid)["todo_history"]  # every accepted list, in order (refused calls change nothing)
    assert [[t["status"] for t in h] for h in history] == [["done", "in_progress"], ["done", "done", "pending"]]


@pytest.mark.parametrize("tool, args, kind", [
    ("read_file", "{not json", "bad_json"),
    ("read_file", "[1, 2]", "bad_json"),
    ("read_file", ["path"], "bad_json"),
    ("rm_rf", {}, "unknown_tool"),
    (None, {}, "unknown_tool"),
    ("read_file", {}, "invalid_arguments"),
    ("read_file", {"path": 7}, "invalid_arguments"),
    ("read_file", {"path": "a", "start_line": "1"}, "invalid_arguments"),
    ("read_file", {"path": "a", "start_line": 0}, "invalid_arguments"),
    ("read_file", {"path": "a", "extra": 1}, "invalid_arguments"),
    ("write_file", {"path": "a"}, "invalid_arguments"),
    ("run_terminal_cmd", {"command": "true", "timeout": -1}, "invalid_arguments"),
    ("read_file", {"path": "../etc/passwd"}, "path_outside_workspace"),
    ("read_file", '{"path": "/etc/passwd"}', "path_outside_workspace"),
])
def test_malformed_calls_are_structured_errors(env, sid, tool, args, kind):
    obs = env.call(sid, tool, args)
    assert not obs.ok and obs.error == kind and obs.content.startswith(f"error ({kind}):")
    assert Observation.from_dict(json.loads(obs.to_json())) == obs


def test_unknown_sandbox_is_an_observation(env):
    assert env.call("sbx-nope", "list_dir", {}).error == "unknown_sandbox"


def test_submit_ends_the_episode(env):
    sid = env.create()
    assert env.call(sid, "submit", {"summary": "did it"}).ok
    assert env.call(sid, "list_dir", {}).error == "already_submitted"
    episode = env.close(sid)
    assert episode["submitted"] and episode["summary"] == "did it" and episode["errors"] == {"already_submitted": 1}
    assert env.episode(sid)["calls"] == 2
