"""The tools' JSON schemas (one source for training rollouts and serving) and argument validation.

`tool_specs()` is the OpenAI-style tools list: [{"type": "function", "function": {name, description,
parameters}}]. Arguments are validated with `jsonschema`; every schema forbids unknown properties.
The desktop tools (`DESKTOP_TOOL_NAMES`: browser and screenshot, run by env/desktop/) are registered here too but
offered only where a desktop is (`tool_specs(ALL_TOOL_NAMES)`, `desktop.DesktopEnvironment.tools`).
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

_SELECTOR = {"type": "string", "minLength": 1, "description": "CSS selector of the element, e.g. '#submit'."}
_PIXEL = {"type": "number", "minimum": 0}

_DESKTOP_TOOLS: dict[str, tuple[str, dict]] = {
    "browser_open": ("Open a URL in the desktop's browser and wait for the page to load; returns its text.", _obj({
        "url": {"type": "string", "minLength": 1, "pattern": "^(https?://|file:|about:|data:)",
                "description": "http(s)://, file:, about: or data: URL."}}, ("url",))),
    "browser_click": (("Click an element by CSS selector, or the point (x, y) in screenshot pixels; give either "
                       "selector or both x and y. Returns the page's text afterwards."), _obj({
        "selector": _SELECTOR, "x": {**_PIXEL, "description": "Horizontal pixel from the left edge."},
        "y": {**_PIXEL, "description": "Vertical pixel from the top edge."}})),
    "browser_type": (("Type text into the element a CSS selector names (it is clicked first), or into the focused "
                      "element; each newline presses Enter."), _obj({
        "text": {"type": "string", "minLength": 1, "maxLength": 20_000, "description": "The text to type."},
        "selector": _SELECTOR}, ("text",))),
    "browser_read": ("Read the current page as text: its visible text, its accessibility tree, or both.", _obj({
        "mode": {"type": "string", "enum": ["text", "accessibility", "both"],
                 "description": "What to return (default: text)."}})),
    "screenshot": (("Take a screenshot of the browser window (stored as a PNG in the episode record); returns the "
                    "page's text."), _obj({})),
}

TOOL_NAMES = tuple(_TOOLS)  # the coding tools every sandbox offers
DESKTOP_TOOL_NAMES = tuple(_DESKTOP_TOOLS)  # the browser tools a desktop sandbox adds (env/desktop/)
ALL_TOOL_NAMES = TOOL_NAMES + DESKTOP_TOOL_NAMES
_ALL = {**_TOOLS, **_DESKTOP_TOOLS}
_VALIDATORS = {name: jsonschema.Draft202012Validator(schema) for name, (_, schema) in _ALL.items()}


def tool_specs(names: tuple[str, ...] = TOOL_NAMES) -> list[dict[str, Any]]:
    """The OpenAI-style function specs of the named tools (default: the coding tools), a fresh copy."""
    unknown = [n for n in names if n not in _ALL]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; expected names from {ALL_TOOL_NAMES}")
    return [{"type": "function", "function": {"name": name, "description": _ALL[name][0],
                                              "parameters": copy.deepcopy(_ALL[name][1])}} for name in names]


class ArgumentError(ValueError):
    """A tool call's arguments are not usable; `kind` is the observation error kind."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def parse_arguments(tool: Any, args: Any, names: tuple[str, ...] = TOOL_NAMES) -> dict[str, Any]:
    """Validated arguments of a call to one of `names`: `args` may be a dict or the model's raw JSON string."""
    if not isinstance(tool, str) or tool not in names or tool not in _ALL:
        raise ArgumentError("unknown_tool", f"unknown tool {tool!r}; expected one of {', '.join(names)}")
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
