"""Embedded SFT data: agentic tool-use transcripts made from this machine's standard library (nothing downloaded).

Each conversation is a small, verifiable coding-agent episode: the user asks where a function is defined and what
it does; the assistant searches with `grep`, reads the file with `read_file`, and answers with the function's
signature and the first line of its docstring. Tool outputs are the real file contents, so the transcripts are
exactly what the tool harness would have produced.
"""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path
from typing import Iterator

from composer2_jax.data.sources import stdlib_root

SYSTEM = "You are a coding agent. Use the tools to inspect the repository, then answer concisely."


def _functions(path: Path) -> Iterator[tuple[str, int, int, str, str]]:
    """(name, first line, last line, signature, docstring line) of documented top-level functions."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if doc:
                sig = f"def {node.name}({ast.unparse(node.args)})"
                yield node.name, node.lineno, node.end_lineno or node.lineno, sig, doc.strip().splitlines()[0]


def _episode(root: Path, path: Path, fn) -> dict:
    name, lo, hi, sig, doc = fn
    rel = str(path.relative_to(root))
    lines = path.read_text(encoding="utf-8").splitlines()
    hi = min(hi, lo + 24)
    body = "\n".join(f"{i}\t{lines[i - 1]}" for i in range(lo, hi + 1))
    return {"messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Where is `{name}` defined, and what does it do?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "grep", "arguments": {"pattern": f"def {name}\\(", "path": "."}}]},
        {"role": "tool", "name": "grep", "content": f"{rel}:{lo}:def {name}("},
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "read_file", "arguments": {"path": rel, "start_line": lo, "end_line": hi}}]},
        {"role": "tool", "name": "read_file", "content": body},
        {"role": "assistant", "content": f"`{sig}` in {rel}:{lo}. {doc}"},
    ]}


def write_stdlib_chats(out: str | Path, n: int = 512, seed: int = 0) -> Path:
    """Write n tool-use conversations as JSONL ({"messages": [...]} per line); returns the path."""
    root = Path(stdlib_root())
    files = sorted(root.glob("*.py"))
    random.Random(seed).shuffle(files)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(out, "w", encoding="utf-8") as f:
        for path in files:
            for fn in _functions(path):
                f.write(json.dumps(_episode(root, path, fn), ensure_ascii=False) + "\n")
                written += 1
                if written >= n:
                    return out
    if written == 0:
        raise ValueError(f"no documented functions found under {root}")
    return out
