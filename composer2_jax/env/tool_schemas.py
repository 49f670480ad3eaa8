"""The tools' JSON schemas (one source for training rollouts and serving) and argument validation.

`TOOL_SPECS` is the OpenAI-style tools list: [{"type": "function", "function": {name, description,
parameters}}]. Arguments are validated with `jsonschema`; every schema forbids unknown properties.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema

TODO_STATUSES = ("pending", "in_progress", "done")


def _obj(properties: dict, required: tuple[str, ...] = ()) -> dict:
    """An object schema with no extra properties."""
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_PATH = {"type": "string", "minLength": 1,
         "description": "Path relative to the workspace root (or absolute under /workspace)."}
_LINE = {"type": "integer", "minimum": 1}

_TOOLS: dict[str, tuple[str, dict]] = {
    "read_file": ("Read a text file, optionally only lines start_line..end_line (1-based, inclusive).", _obj({
        "path": _PATH, "start_line": {**_LINE, "description": "First line to return (default 1)."},
        "end_line": {**_LINE, "description": "Last line to return (default: end of file)."}}, ("path",))),
    "write_file": ("Create or overwrite a file with the given content; parent directories are created.", _obj({
        "path": _PATH, "content": {"type": "string", "description": "The complete new file content."}},
        ("path", "content"))),
    "edit_file": ("Replace the exact text old_string, which must occur exactly once in the file, by new_string.", _obj({
        "path": _PATH, "old_string": {"type": "string", "minLength": 1, "description": "Exact text to replace."},
        "new_string": {"type": "string", "description": "Replacement text."}}, ("path", "old_string", "new_string"))),
    "list_dir": ("List a directory's entries with their type and size.", _obj({
        "path": {**_PATH, "description": "Directory relative to the workspace root (default: the root)."}})),
    "grep": ("Search workspace files for a regular expression (Python syntax); returns path:line: text.", _obj({
        "pattern": {"type": "string", "minLength": 1, "description": "Regular expression."},
        "path": {**_PATH, "description": "File or directory to search (default: the whole workspace)."},
        "glob": {"type": "string", "minLength": 1,
                 "description": "Only files whose name or path matches, e.g. '*.py'."},
        "ignore_case": {"type": "boolean", "description": "Case-insensitive search."}}, ("pattern",))),
    "run_terminal_cmd": (("Run a shell command (sh -c) in the workspace; returns exit code, stdout and stderr "
                          "(long output is truncated in the middle). Processes do not outlive the command."), _obj({
        "command": {"type": "string", "minLength": 1, "description": "The shell command."},
        "cwd": {**_PATH, "description": "Working directory relative to the workspace root (default: the root)."},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Wall-clock limit in seconds."}},
        ("command",))),
    "todo_write": ("Write your plan as a todo list; merge=true updates items by id and appends new ones.", _obj({
        "todos": {"type": "array", "items": _obj({
            "id": {"type": "string", "minLength": 1}, "content": {"type": "string", "minLength": 1},
            "status": {"type": "string", "enum": list(TODO_STATUSES)}}, ("id", "content", "status"))},
        "merge": {"type": "boolean", "description": "Update the existing list instead of replacing it."}},
        ("todos",))),
    "submit": ("Finish the task: the workspace as it is now is your answer.", _obj({
        "summary": {"type": "string", "description": "What you changed and why."}})),
}

TOOL_NAMES = tuple(_TOOLS)
_VALIDATORS = {name: jsonschema.Draft202012Validator(schema) for name, (_, schema) in _TOOLS.items()}


def tool_specs() -> list[dict[str, Any]]:
    """The OpenAI-style function specs of every tool (a fresh copy)."""
    return [{"type": "function", "function": {"name": name, "description": desc, "parameters": copy.deepcopy(schema)}}
            for name, (desc, schema) in _TOOLS.items()]


class ArgumentError(ValueError):
    """A tool call's arguments are not usable; `kind` is the observation error kind."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def parse_arguments(tool: Any, args: Any) -> dict[str, Any]:
    """Validated arguments of a call: `args` may be a dict or the model's raw JSON string."""
    if not isinstance(tool, str) or tool not in _TOOLS:
        raise ArgumentError("unknown_tool", f"unknown tool {tool!r}; expected one of {', '.join(TOOL_NAMES)}")
    if isinstance(args, (str, bytes)):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as e:
            raise ArgumentError("bad_json", f"arguments of {tool} are not valid JSON: {e}") from None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ArgumentError("bad_json", f"arguments of {tool} must be a JSON object, got {type(args).__name__}")
    error = jsonschema.exceptions.best_match(_VALIDATORS[tool].iter_errors(args))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise ArgumentError("invalid_arguments", f"{tool}: {error.message}" + (f" (at {where})" if where else ""))
    return args
