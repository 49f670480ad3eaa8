"""What a tool call returns to the model: an ok flag, text content, structured fields and an error kind."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

# Error kinds a tool call can report (the `error` field); the model sees them, rewards can count them.
ERROR_KINDS = (
    "bad_json",  # the arguments string is not a JSON object
    "unknown_tool",  # no tool of that name
    "invalid_arguments",  # missing, unknown or mistyped argument, bad regex, empty old_string
    "path_outside_workspace",  # a path leaves /workspace, lexically or through a symlink
    "not_found", "is_directory", "not_a_directory", "binary_file", "out_of_range",
    "no_match", "multiple_matches",  # edit_file: old_string found 0 or > 1 times
    "no_space", "too_large", "permission_denied", "os_error",
    "timeout",  # run_terminal_cmd or grep ran past its wall-clock limit
    "cpu_budget_exhausted",  # the sandbox spent its CPU seconds
    "already_submitted",  # a call after submit
    "unknown_sandbox", "sandbox_error",  # no such sandbox / it died or failed
    "internal_error",
)


@dataclasses.dataclass
class Observation:
    """Result of one tool call; `content` is what the model reads, `fields` the same facts for programs."""

    ok: bool
    content: str
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: str | None = None

    def __post_init__(self):
        if self.error is not None and self.error not in ERROR_KINDS:
            raise ValueError(f"Observation.error={self.error!r}; expected one of {ERROR_KINDS}")

    @classmethod
    def failure(cls, kind: str, message: str, **fields: Any) -> Observation:
        """An error observation whose content is the message."""
        return cls(ok=False, content=f"error ({kind}): {message}", fields=fields, error=kind)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """JSON text."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Observation:
        """Inverse of to_dict."""
        return cls(ok=bool(d["ok"]), content=d["content"], fields=dict(d.get("fields") or {}), error=d.get("error"))
