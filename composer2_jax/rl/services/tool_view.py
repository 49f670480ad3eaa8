"""An Environment as one RL setup offers it: a subset of the tools, with or without their schemas in the prompt.

The harness renders `env.tools()` into the system prompt; the 4 KB of full schemas would dwarf a toy model's
context, so a view can offer a subset and keep the schemas out of the prompt (the model learns the call format
from SFT transcripts rendered the same way). Calls to tools outside the subset get the env's own `unknown_tool`
error observation. Everything else (fork, close, info, import_repo, …) passes through to the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from composer2_jax.env.observation import Observation
from composer2_jax.env.tool_schemas import ALL_TOOL_NAMES, TOOL_NAMES, tool_specs


class ToolView:
    """Wraps an Environment (or EnvironmentClient): `tools()` and `call()` restricted to `names`."""

    def __init__(self, env: Any, names: Sequence[str] = TOOL_NAMES, schemas_in_prompt: bool = True):
        unknown = sorted(set(names) - set(ALL_TOOL_NAMES))  # desktop tools too, for a desktop.DesktopEnvironment
        if unknown:
            raise ValueError(f"unknown tools {unknown}; expected names from {ALL_TOOL_NAMES}")
        self.env, self.names, self.schemas_in_prompt = env, tuple(names), schemas_in_prompt

    def tools(self) -> list[dict]:
        """The schemas the prompt shows: the subset's, or none."""
        if not self.schemas_in_prompt:
            return []
        return [s for s in tool_specs(ALL_TOOL_NAMES) if _spec_name(s) in self.names]

    def call(self, sid: str, tool: Any, args: Any = None) -> Observation:
        """The env's call for offered tools; `unknown_tool` for the rest."""
        if tool not in self.names:
            return Observation.failure("unknown_tool", f"unknown tool {tool!r}; available: {', '.join(self.names)}")
        return self.env.call(sid, tool, args)

    def __getattr__(self, name: str) -> Any:
        """Everything else is the environment's."""
        return getattr(self.env, name)


def _spec_name(spec: dict) -> str:
    """The function name of an OpenAI-style tool spec."""
    return spec.get("function", spec).get("name", "")
