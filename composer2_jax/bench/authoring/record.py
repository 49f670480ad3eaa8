"""Authoring checks: install the tasks' shared files, record the hidden values from the oracle.

    python -m composer2_jax.bench.authoring.record sync                  # install the shared files into every task
    python -m composer2_jax.bench.authoring.record record TASK_DIR ...   # expected.json from the oracle's answers

`record` runs the task's oracle in a sandbox, collects the runner's answers (through the same grading path as
bench/grade.py) and writes tests/expected.json: exact values, or check.json's `match` templates (approx, sha256),
overridden by values setup.py's `expected(ctx)` computes from trusted code (labels of generated logs). Read the
diff before committing it. `record_local` does the same on this host for a generator whose code is trusted.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from pathlib import Path
from typing import Any

from composer2_jax.bench import shared_files
from composer2_jax.bench.grade import pack_dir, read_verifier_files, run_verifier, unpack_command, upload_commands
from composer2_jax.verify import verdict_runner as vr
from composer2_jax.verify.verdict import HOST_ONLY, RUNNER_NAME, VerdictError


def task_dirs(root: Path) -> list[Path]:
    """Task folders (holding task.toml) under root: a suite, a folder of suites, or one task."""
    return sorted(p.parent for p in Path(root).rglob("task.toml"))


def sync(root: Path) -> list[Path]:
    """Install the shared files (bench/shared_files.py: the runner, the pinned-release script) into every task folder
    under root that lacks them or holds a stale copy; the files written."""
    return [path for task in task_dirs(root) for path in shared_files.install(task)]


def expected_from_answers(answers: dict[str, Any], check: dict) -> dict:
    """expected.json from an oracle's answers: exact values, except names matching a check.json `match` pattern
    ({glob: spec template}) take that template with the answer filled in (approx, sha256)."""
    import hashlib

    probes = {}
    for name in sorted(answers):
        value = answers[name]
        template = next((t for pattern, t in check.get("match", {}).items() if fnmatch.fnmatchcase(name, pattern)),
                        None)
        if template is None:
            probes[name] = {"value": value}
        elif "sha256" in template:
            probes[name] = {"sha256": hashlib.sha256(vr.canonical(value).encode()).hexdigest()}
        elif "approx" in template:
            probes[name] = {**template, "approx": value}
        else:
            probes[name] = {**template, "value": value}
    return {"version": vr.VERSION, "probes": probes}


def record_local(repo: Path, tests_dir: Path, python: str, timeout_s: float = 600.0) -> dict:
    """The runner's answers.json for `repo`, run on this host (no sandbox) with `python`, from a copy of tests_dir
    without expected.json; the children's temporary folders go to a tmpfs when there is one (/dev/shm), as in the
    sandbox, so directory listings come out in the same order. For generators whose code under test is trusted."""
    import shutil
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tests, out = Path(tmp) / "tests", Path(tmp) / "out"
        shutil.copytree(tests_dir, tests, ignore=shutil.ignore_patterns(vr.EXPECTED, "__pycache__"))
        scratch = tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
        try:
            run = subprocess.run([python, "-I", "-S", str(tests / RUNNER_NAME), "--out", str(out)], cwd=repo,
                                 capture_output=True, text=True, timeout=timeout_s, check=False,
                                 env={"PATH": "/usr/local/bin:/usr/bin:/bin", "TMPDIR": scratch, "LANG": "C.UTF-8"})
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if not (out / vr.ANSWERS).is_file():
            raise VerdictError(f"the runner wrote no answers for {repo}: {run.stdout[-2000:]}{run.stderr[-2000:]}")
        return json.loads((out / vr.ANSWERS).read_text())


def record(task_path: Path, env) -> dict:
    """Run the task's oracle in a sandbox of `env`, collect the runner's answers, write tests/expected.json; the
    answers.

    Items answered by setup.py's `expected(ctx)` (trusted values such as labels of generated logs) override the
    oracle's answers; everything else is the oracle's answer, so read the diff before committing it.
    """
    from composer2_jax.bench.task import load_task

    task = load_task(task_path)
    check = json.loads((task.tests_dir / vr.CHECK).read_text())
    answers, output = oracle_answers(env, task)
    if answers is None:
        raise VerdictError(f"{task.name}: the oracle's run wrote no answers:\n{output}")
    unfinished = {r: rec for r, rec in answers["runs"].items() if rec.get("status") != "done"}
    if unfinished:
        raise VerdictError(f"{task.name}: runs of the oracle did not finish: {unfinished}\n{output}")
    expected = expected_from_answers(answers["answers"], check)
    expected["probes"].update(trusted_expected(task.tests_dir))
    (task.tests_dir / vr.EXPECTED).write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return answers


def oracle_answers(env, task) -> tuple[dict | None, str]:
    """(answers.json, verifier output) of the task's runner on its oracle-solved repository, in a sandbox."""
    sid = env.create(task.repo_dir())
    try:
        blob = "/tmp/.solution.b64"
        for command in upload_commands(pack_dir(task.solution_dir), blob):
            env.call(sid, "run_terminal_cmd", {"command": command, "timeout": 60})
        solve = env.call(sid, "run_terminal_cmd", {"command": unpack_command(blob, "/tmp/solution") +
                                                   " && cd /workspace && bash /tmp/solution/solve.sh", "timeout": 600})
        if solve.fields.get("exit_code") != 0:
            raise VerdictError(f"{task.name}: solve.sh failed: {solve.content[:2000]}")
        gid = env.fork(sid)
        try:
            _, logs_dir, error = run_verifier(env, gid, task, HOST_ONLY)
            if error is not None:
                raise VerdictError(f"{task.name}: {error}")
            got, _, read_error = read_verifier_files(env, gid, logs_dir, (vr.ANSWERS, "test-output.txt"))
        finally:
            env.close(gid)
    finally:
        env.close(sid)
    output = (got["test-output.txt"] or b"").decode("utf-8", "replace")
    if read_error is not None or got[vr.ANSWERS] is None:
        return None, f"{read_error or ''}\n{output}"
    return json.loads(got[vr.ANSWERS]), output


def trusted_expected(tests_dir: Path) -> dict:
    """Expected specs computed by the task's setup.py `expected(ctx)` on the host (authoring only), else {}."""
    path = Path(tests_dir) / vr.SETUP
    if not path.is_file():
        return {}
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - our own task's setup, authoring
    if "expected" not in namespace:
        return {}
    return namespace["expected"]({"tests": str(tests_dir)})


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m composer2_jax.bench.authoring.record",
                                description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sync", help="install the shared files (runner, sdist script) into every task folder")
    s.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"))
    r = sub.add_parser("record", help="write tests/expected.json from the oracle's answers")
    r.add_argument("tasks", nargs="+")
    r.add_argument("--workers", type=int, default=2, help="tasks recorded at once")
    args = p.parse_args(argv)
    if args.cmd == "sync":
        for path in sync(Path(args.root)):
            print(f"updated {path}")
        return 0
    from concurrent.futures import ThreadPoolExecutor

    from composer2_jax.env import Environment

    with Environment(pool_size=args.workers) as env, ThreadPoolExecutor(args.workers) as pool:
        for t, answers in zip(args.tasks, pool.map(lambda t: record(Path(t), env), args.tasks)):
            print(f"{t}: {len(answers['answers'])} answers recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
