"""The tool-call RPC the model uses: validate a call, run it in the sandbox, return an `Observation`.

`call_tool` never raises: bad JSON, unknown tools, bad arguments, paths outside the workspace, sandbox
failures and bugs all come back as error observations. File tools run inside the sandbox (guest/fileops.py)
as the sandbox user, so symlinks and permissions resolve exactly as the model's own commands see them.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from typing import Any

from composer2_jax.env.bwrap import WORKSPACE
from composer2_jax.env.observation import ERROR_KINDS, Observation
from composer2_jax.env.sandbox import Sandbox, SandboxError
from composer2_jax.env.sandbox_config import SandboxLimits
from composer2_jax.env.tool_schemas import ArgumentError, parse_arguments

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MARKS = {"done": "[x]", "in_progress": "[~]", "pending": "[ ]"}


@dataclasses.dataclass
class Episode:
    """Per-sandbox agent state the rewards read: the plan, the submission, call counts."""

    todos: list[dict[str, str]] = dataclasses.field(default_factory=list)
    todo_history: list[list[dict[str, str]]] = dataclasses.field(default_factory=list)  # the list after each todo_write
    submitted: bool = False
    summary: str | None = None
    calls: int = 0
    errors: dict[str, int] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ToolContext:
    """What a tool handler needs: the sandbox, its episode, the limits and the command environment."""

    sandbox: Sandbox
    episode: Episode
    limits: SandboxLimits
    env: dict[str, str]
    user: str | None = None  # image sandboxes: the user commands and file tools run as ("" = root)
    confined: bool = True  # paths must stay under /workspace (workspace sandboxes); image sandboxes: any path
    rlimits: dict | None = None  # per-command rlimits (None: limits.command_rlimits())

    def command_limits(self) -> dict:
        """The rlimits of a command."""
        return self.rlimits if self.rlimits is not None else self.limits.command_rlimits()

    def user_field(self) -> dict:
        """{"user": ...} for guest requests in an image sandbox, {} in a workspace sandbox."""
        return {} if self.user is None else {"user": self.user}


def call_tool(ctx: ToolContext, tool: Any, args: Any) -> Observation:
    """Run one tool call; always returns an Observation."""
    ctx.episode.calls += 1
    try:
        parsed = parse_arguments(tool, args)
        if ctx.episode.submitted:
            obs = Observation.failure("already_submitted",
                                      f"the episode was submitted; {tool} is not possible any more")
        else:
            if ctx.confined:
                _check_paths(parsed)
            obs = _HANDLERS[tool](ctx, parsed)
    except ArgumentError as e:
        obs = Observation.failure(e.kind, str(e))
    except SandboxError as e:
        obs = Observation.failure("sandbox_error", str(e))
    except Exception as e:  # noqa: BLE001 - a tool call must never raise into the rollout
        obs = Observation.failure("internal_error", f"{type(e).__name__}: {e}")
    if obs.error:
        ctx.episode.errors[obs.error] = ctx.episode.errors.get(obs.error, 0) + 1
    return obs


def _check_paths(args: dict[str, Any]) -> None:
    """Refuse path arguments that leave the workspace lexically (the guest also checks symlinks)."""
    for key in ("path", "cwd"):
        path = args.get(key)
        if path is None:
            continue
        full = os.path.normpath(path if path.startswith("/") else os.path.join(WORKSPACE, path))
        if "\x00" in path or not (full == WORKSPACE or full.startswith(WORKSPACE + "/")):
            raise ArgumentError("path_outside_workspace", f"{key} {path!r} is outside the workspace {WORKSPACE}")


def _guest(ctx: ToolContext, op: str, wait_s: float = 60.0, **fields) -> dict:
    """One guest request (as the context's user); a guest-side failure becomes an ArgumentError carrying its kind."""
    reply = ctx.sandbox.request(op, wait_s=wait_s, **ctx.user_field(), **fields)
    if not reply.get("ok"):
        kind = reply.get("error")
        raise ArgumentError(kind if kind in ERROR_KINDS else "sandbox_error", reply.get("message", f"{op} failed"))
    reply.pop("ok")
    return reply


def _read_file(ctx: ToolContext, a: dict) -> Observation:
    """read_file."""
    r = _guest(ctx, "read_file", max_bytes=ctx.limits.read_bytes, **a)
    content = r.pop("content")
    if r["start_line"] == 1 and r["end_line"] >= r["total_lines"] and not r["truncated"]:
        return Observation(True, content, r)
    note = (f"[lines {r['start_line']}-{r['end_line']} of {r['total_lines']}"
            + (", truncated]" if r["truncated"] else "]"))
    return Observation(True, content + ("" if content.endswith("\n") or not content else "\n") + note, r)


def _write_file(ctx: ToolContext, a: dict) -> Observation:
    """write_file."""
    r = _guest(ctx, "write_file", **a)
    return Observation(True, f"{'created' if r['created'] else 'wrote'} {r['path']} ({r['bytes']} bytes)", r)


def _edit_file(ctx: ToolContext, a: dict) -> Observation:
    """edit_file."""
    r = _guest(ctx, "edit_file", **a)
    return Observation(True, f"edited {r['path']} at line {r['line']}", r)


def _list_dir(ctx: ToolContext, a: dict) -> Observation:
    """list_dir."""
    r = _guest(ctx, "list_dir", max_entries=ctx.limits.list_entries, **a)
    lines = [e["name"] + ("/" if e["type"] == "dir" else "") + (f"  ({e['size']} B)" if e["type"] == "file" else "")
             for e in r["entries"]]
    return Observation(True, "\n".join(lines) + ("\n[truncated]" if r["truncated"] else ""), r)


def _grep(ctx: ToolContext, a: dict) -> Observation:
    """grep."""
    lim = ctx.limits
    r = _guest(ctx, "grep", wait_s=lim.grep_timeout_s + 30, max_results=lim.grep_results,
               max_file_bytes=lim.grep_file_bytes, timeout_s=lim.grep_timeout_s, limits=ctx.command_limits(), **a)
    lines = [f"{m['path']}:{m['line']}: {m['text']}" for m in r["matches"]] or ["(no matches)"]
    return Observation(True, "\n".join(lines) + ("\n[more matches not shown]" if r["truncated"] else ""), r)


def clean_output(raw: str) -> tuple[str, bool]:
    """Bytes (as latin-1 text) to displayable UTF-8 text; True if it looked binary."""
    data = raw.encode("latin-1")
    text = data.decode("utf-8", "replace")
    text, n = _CONTROL.subn("\ufffd", text)
    bad = n + text.count("\ufffd")
    if data and bad > 0.3 * len(text):
        return f"[binary output, {len(data)} bytes, not shown]", True
    return text, bad > 0


def _stream(r: dict, name: str) -> tuple[str, dict]:
    """One stream's display text (head, truncation marker, tail) and its fields."""
    head, binary = clean_output(r[name])
    tail, binary_tail = clean_output(r[name + "_tail"]) if r[name + "_tail"] else ("", False)
    total = r[name + "_bytes"]
    dropped = total - len(r[name].encode("latin-1")) - len(r[name + "_tail"].encode("latin-1"))
    text = head + (f"\n[... {dropped} bytes truncated ...]\n" + tail if dropped > 0 else "")
    return text, {name: text, name + "_bytes": total, name + "_truncated": dropped > 0,
                  name + "_binary": binary or binary_tail}


def _run_terminal_cmd(ctx: ToolContext, a: dict) -> Observation:
    """run_terminal_cmd."""
    lim = ctx.limits
    timeout = min(a.get("timeout", lim.timeout_s), lim.max_timeout_s)
    r = _guest(ctx, "exec", wait_s=timeout + ctx.sandbox.REPLY_GRACE_S, cmd=a["command"], cwd=a.get("cwd", "."),
               env=ctx.env, timeout_s=timeout, limits=ctx.command_limits(), cpu_budget_s=lim.sandbox_cpu_s)
    out, out_fields = _stream(r, "stdout")
    err, err_fields = _stream(r, "stderr")
    fields = {"exit_code": r["exit_code"], "timed_out": r["timed_out"], "killed": r["killed"],
              "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], **out_fields, **err_fields}
    if r["timed_out"]:
        killed = "every process of the command" if ctx.confined else "the command's process group"
        status, error = f"timed out after {timeout:g} s; {killed} was killed", "timeout"
    elif r["killed"] == "output_limit":
        status, error = f"killed: output exceeded {lim.output_kill_bytes} bytes", "too_large"
    elif r["exit_code"] is not None and r["exit_code"] < 0:
        status, error = f"killed by signal {-r['exit_code']}", None
    else:
        status, error = f"exit code {r['exit_code']}", None
    content = f"{status}\nstdout:\n{out}" + (f"\nstderr:\n{err}" if err else "")
    return Observation(error is None, content, fields, error)


def _todo_write(ctx: ToolContext, a: dict) -> Observation:
    """todo_write."""
    items = [dict(t) for t in a["todos"]]
    ids = [t["id"] for t in items]
    if len(set(ids)) != len(ids):
        raise ArgumentError("invalid_arguments", f"todo ids must be unique, got {ids}")
    if a.get("merge"):
        merged = {t["id"]: t for t in ctx.episode.todos}
        for t in items:
            merged[t["id"]] = t
        items = list(merged.values())
    ctx.episode.todos = items
    ctx.episode.todo_history.append([dict(t) for t in items])
    text = "\n".join(f"{_MARKS[t['status']]} {t['id']}. {t['content']}" for t in items) or "(empty plan)"
    return Observation(True, text, {"todos": [dict(t) for t in items]})


def _submit(ctx: ToolContext, a: dict) -> Observation:
    """submit."""
    ctx.episode.submitted, ctx.episode.summary = True, a.get("summary")
    return Observation(True, "submitted", {"summary": a.get("summary")})


_HANDLERS: dict[str, Callable[[ToolContext, dict], Observation]] = {
    "read_file": _read_file, "write_file": _write_file, "edit_file": _edit_file, "list_dir": _list_dir,
    "grep": _grep, "run_terminal_cmd": _run_terminal_cmd, "todo_write": _todo_write, "submit": _submit,
}
