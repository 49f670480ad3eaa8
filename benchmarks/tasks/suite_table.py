"""The measured comparison of suite versions (docs/benchmark.md, "Suite v0 and v1, measured"), computed task by task.

Run:      python -m benchmarks.tasks.suite_table                    (prints the table for v0 and v1)
          python -m benchmarks.tasks.suite_table --write            (also rewrites the table in docs/benchmark.md)
Hardware: any host (no sandbox): each task's repository is materialised (generators run, pinned sdists fetched or
          taken from the cache) and its solve.sh run with bash on a scratch copy. ≈ 1 min on 2 cores.

Per task: instruction words (whitespace-separated), whether the instruction is vague (≤ 40 words naming no file or
function: no file name or path, no backticked code, no `identifier(`, no snake_case or camelCase name the repository
defines, no dotted path), files and lines the reference
solution changes (`git diff --no-index --numstat` of the repository before and after solve.sh, generated evidence
excluded), repository size (text files and their lines, evidence and .git excluded), evidence volume (files and
bytes under logs/, data/ or evidence/ of the materialised repository), hidden tests (cases in tests/expected.json).
Medians per suite, and the share of tasks with a reference of at least 8 files or 300 lines.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from composer2_jax.bench.task import Task, load_suite

EVIDENCE = ("logs", "data", "evidence")  # top-level folders of generated evidence
DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmark.md"
BEGIN, END = "<!-- suite-table:begin -->", "<!-- suite-table:end -->"


def _is_evidence(rel: Path) -> bool:
    return bool(rel.parts) and rel.parts[0] in EVIDENCE


def _text_lines(path: Path) -> int | None:
    """Lines of a text file, None for a binary one."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def repo_stats(repo: Path) -> dict:
    """Source files and lines (evidence and .git excluded), evidence files and bytes."""
    files = lines = ev_files = ev_bytes = 0
    for p in repo.rglob("*"):
        rel = p.relative_to(repo)
        if not p.is_file() or ".git" in rel.parts or "__pycache__" in rel.parts:
            continue
        if _is_evidence(rel):
            ev_files, ev_bytes = ev_files + 1, ev_bytes + p.stat().st_size
            continue
        n = _text_lines(p)
        if n is not None:
            files, lines = files + 1, lines + n
    return {"repo_files": files, "repo_lines": lines, "evidence_files": ev_files, "evidence_bytes": ev_bytes}


def reference_change(task: Task, repo: Path) -> dict:
    """Files and lines (added + removed) the oracle changes, run with bash on a scratch copy of the repository."""
    with tempfile.TemporaryDirectory() as tmp:
        before, after = Path(tmp) / "a", Path(tmp) / "b"
        ignore = shutil.ignore_patterns(".git", "__pycache__", *EVIDENCE)
        shutil.copytree(repo, before, ignore=ignore)
        shutil.copytree(repo, after, ignore=ignore)
        run = subprocess.run(["bash", str(task.solution_dir / "solve.sh")], cwd=after, capture_output=True,
                             text=True, timeout=600, check=False)
        if run.returncode != 0:
            raise RuntimeError(f"{task.name}: solve.sh failed ({run.returncode}): {run.stderr[-1000:]}")
        for p in list(after.rglob("__pycache__")):
            shutil.rmtree(p, ignore_errors=True)
        diff = subprocess.run(["git", "diff", "--no-index", "--numstat", "a", "b"], cwd=tmp, capture_output=True,
                              text=True, check=False)
    files = lines = 0
    for row in diff.stdout.splitlines():
        added, removed, _ = row.split("\t", 2)
        files += 1
        lines += (int(added) if added != "-" else 0) + (int(removed) if removed != "-" else 0)
    return {"ref_files": files, "ref_lines": lines}


def vague(instruction: str, repo: Path) -> bool:
    """≤ 40 words and names nothing of the repository: no file name or path, no `code` in backticks, no
    `identifier(` call, no dotted or snake_case identifier that the repository's Python code defines."""
    if len(instruction.split()) > 40 or re.search(r"`|\b[A-Za-z_]\w*\(|\b\w+/\w+", instruction):
        return False
    files = {p.name for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    defined = set()
    for path in repo.rglob("*.py"):
        if ".git" not in path.parts:
            defined |= set(re.findall(r"^\s*(?:def|class)\s+(\w+)", path.read_text(errors="replace"), re.M))
    words = set(re.findall(r"[\w.\-]+", instruction))
    identifiers = {w for w in words if "_" in w.strip("_") or re.search(r"[a-z][A-Z]", w)}
    return not (words & files) and not (identifiers & defined) and not re.search(r"\b\w+\.\w+\.\w+\b", instruction)


def hidden_tests(task: Task) -> int:
    """Cases the verifier judges (tests/expected.json), 0 without one."""
    path = task.tests_dir / "expected.json" if task.tests_dir else None
    return len(json.loads(path.read_text())["probes"]) if path and path.is_file() else 0


def task_row(task: Task, cache: Path | None = None) -> dict:
    """Every measure of one task."""
    repo = task.repo_dir(cache)
    return {"task": task.name, "category": task.category, "words": len(task.instruction.split()),
            "vague": vague(task.instruction, repo), "hidden_tests": hidden_tests(task),
            **repo_stats(repo), **reference_change(task, repo)}


def summary(rows: list[dict]) -> dict:
    """Medians and shares over a suite's task rows."""
    med = lambda k: statistics.median(r[k] for r in rows)  # noqa: E731
    with_evidence = [r for r in rows if r["evidence_files"]]
    return {"tasks": len(rows), "words": med("words"), "vague": sum(r["vague"] for r in rows) / len(rows),
            "ref_files": med("ref_files"), "ref_lines": med("ref_lines"),
            "large": sum(r["ref_files"] >= 8 or r["ref_lines"] >= 300 for r in rows) / len(rows),
            "repo_files": med("repo_files"), "repo_lines": med("repo_lines"),
            "evidence_tasks": len(with_evidence),
            "evidence_mb": sum(r["evidence_bytes"] for r in with_evidence) / 1e6,
            "evidence_files": statistics.median(r["evidence_files"] for r in with_evidence) if with_evidence else 0,
            "hidden_tests": med("hidden_tests")}


def markdown(summaries: dict[str, dict]) -> str:
    """The table, one column per suite."""
    rows = [("tasks", "tasks", "{:d}"), ("instruction words (median)", "words", "{:g}"),
            ("vague instructions (≤ 40 words, no file or function named)", "vague", "{:.0%}"),
            ("files changed by the reference (median)", "ref_files", "{:g}"),
            ("lines changed by the reference (median)", "ref_lines", "{:g}"),
            ("references ≥ 8 files or ≥ 300 lines", "large", "{:.0%}"),
            ("repository files (median)", "repo_files", "{:g}"), ("repository lines (median)", "repo_lines", "{:g}"),
            ("tasks with generated evidence", "evidence_tasks", "{:d}"),
            ("evidence files per such task (median)", "evidence_files", "{:g}"),
            ("evidence in all, MB", "evidence_mb", "{:.1f}"), ("hidden test cases (median)", "hidden_tests", "{:g}")]
    names = list(summaries)
    out = ["| measure | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, key, fmt in rows:
        out.append(f"| {label} | " + " | ".join(fmt.format(summaries[n][key]) for n in names) + " |")
    return "\n".join(out)


def write_doc(table: str, doc: Path = DOC) -> None:
    """Replace the text between the markers in docs/benchmark.md."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{doc}: no {BEGIN} ... {END} markers; expected the table's place")
    head, rest = text.split(BEGIN, 1)
    doc.write_text(head + BEGIN + "\n" + table + "\n" + END + rest.split(END, 1)[1])


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tasks.suite_table", description=__doc__.splitlines()[0])
    p.add_argument("--suites", default="v0,v1", help="comma-separated suite versions")
    p.add_argument("--write", action="store_true", help="rewrite the table in docs/benchmark.md")
    p.add_argument("--rows", default="", help="also write every task's row as JSON to this file")
    args = p.parse_args(argv)
    all_rows = {s: [task_row(t) for t in load_suite(s).tasks] for s in args.suites.split(",") if s}
    table = markdown({s: summary(rows) for s, rows in all_rows.items()})
    print(table)
    if args.rows:
        Path(args.rows).write_text(json.dumps(all_rows, indent=1))
    if args.write:
        write_doc(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
