"""Negatives: wrong-but-plausible patches a task's verifier must reject, and the agent that applies one.

A task of suite v1 ships, in tests/negatives/, at least three unified diffs (`NAME.patch`, paths relative to the
repository root, `patch -p1`) that look like a fix or a feature and are wrong: the symptom treated instead of the
cause, one case of several fixed, the right change in the wrong layer. The graders keep tests/negatives/ on the
host (verify/verdict.HOST_ONLY), so an agent never sees them. The negative agent drives the harness exactly as the
oracle does (upload, apply through run_terminal_cmd, submit), so a negative is graded like any final workspace;
bench/validate.py requires every one of them to score 0.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from composer2_jax.bench.grade import unpack_command, upload_commands
from composer2_jax.bench.policies import ScriptedPolicy, call
from composer2_jax.bench.task import Task
from composer2_jax.data import tokenizer as tk
from composer2_jax.env.harness import HarnessConfig, Policy

FOLDER = "negatives"
SUFFIX = ".patch"
_CHUNK = 64 * 1024


def negatives(task: Task) -> dict[str, Path]:
    """{name: patch file} of a task's tests/negatives/, in name order (empty when it has none)."""
    folder = task.tests_dir / FOLDER if task.tests_dir is not None else None
    if folder is None or not folder.is_dir():
        return {}
    return {p.name[:-len(SUFFIX)]: p for p in sorted(folder.iterdir()) if p.is_file() and p.name.endswith(SUFFIX)}


def _pack_file(path: Path, arcname: str) -> str:
    """One file as the base64 gzipped tar that unpack_command expects."""
    import base64
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tf.gettarinfo(str(path), arcname=arcname)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        with open(path, "rb") as f:
            tf.addfile(info, f)
    return base64.b64encode(buf.getvalue()).decode()


def patch_replies(patch: Path, config: HarnessConfig) -> list[str]:
    """Upload one patch, apply it in /workspace with `patch -p1` (failing loudly if it does not apply), submit."""
    blob, size = "/tmp/.negative.b64", max(256, min(_CHUNK, config.max_new_tokens - 512))
    chunks = [call("run_terminal_cmd", command=c)
              for c in upload_commands(_pack_file(patch, "change.patch"), blob, size)]
    apply = (unpack_command(blob, "/tmp/negative") + " && cd /workspace && "
             "patch -p1 --batch --no-backup-if-mismatch < /tmp/negative/change.patch && rm -rf /tmp/negative")
    return [f"Uploading a change ({i + 1}/{len(chunks)}).{c}" for i, c in enumerate(chunks)] + [
        "Applying it." + call("run_terminal_cmd", command=apply, timeout=120.0),
        "Applied." + call("submit", summary=f"applied {patch.name}")]


def negative_factory(name: str, tokenizer: tk.Tokenizer, config: HarnessConfig):
    """A function task -> a policy applying the task's negative `name` (KeyError naming the task's negatives)."""
    def factory(task: Task) -> Policy:
        found = negatives(task)
        if name not in found:
            raise KeyError(f"task {task.name!r} has no negative {name!r}; it has {sorted(found)}")
        return ScriptedPolicy(tokenizer, patch_replies(found[name], config), config)
    return factory


__all__ = ["FOLDER", "negative_factory", "negatives", "patch_replies"]
