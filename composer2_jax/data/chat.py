"""The chat template for SFT and serving: render conversations to tokens + loss mask; parse tool calls back.

Rendered format (markers are single special tokens; nothing between turns):

    <|im_system|>system<|im_middle|>{system text}<|im_end|>
    <|im_system|>tools<|im_middle|>{JSON list of tool schemas}<|im_end|>          (only when `tools` is given)
    <|im_user|>user<|im_middle|>{user text}<|im_end|>
    <|im_assistant|>assistant<|im_middle|>{text}<|tool_call|>{"name": "f", "arguments": {}}<|/tool_call|><|im_end|>
    <|im_tool|>{tool name, or "tool"}<|im_middle|>{tool output}<|im_end|>

An assistant turn is its text followed by zero or more tool calls, each `<|tool_call|>` + one JSON object
`{"name": str, "arguments": object}` (keys in that order, `json.dumps(..., ensure_ascii=False)`) + `<|/tool_call|>`,
then `<|im_end|>`. This is exactly what the model emits at serving time: the harness sends the prompt rendered with
`add_generation_prompt=True` (ending in the assistant header), decodes the sampled ids (specials render as their
names), and calls `parse_assistant(text)`.

Loss mask: 1 on the assistant's tokens after its header - text, tool calls and the closing `<|im_end|>` - and 0 on
everything else (headers, system, tool schemas, user and tool turns). Message text is encoded as plain text, so a
marker spelled inside content (say, in a code file) cannot forge a turn boundary.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Optional, Sequence

from composer2_jax.data import tokenizer as tk

ROLES = ("system", "user", "assistant", "tool")
_HEADER_MARKER = {"system": tk.IM_SYSTEM, "user": tk.IM_USER, "assistant": tk.IM_ASSISTANT, "tool": tk.IM_TOOL}


@dataclasses.dataclass(frozen=True)
class RenderedChat:
    """Token ids of a conversation and the per-token loss mask (1 = assistant token)."""

    ids: list[int]
    loss_mask: list[int]


def _content(msg: Mapping, i: int) -> str:
    """A message's text; None/missing is empty."""
    c = msg.get("content")
    if c is None:
        return ""
    if not isinstance(c, str):
        raise ValueError(f"message {i}: content must be a string or null, got {type(c).__name__}")
    return c


def _normalize_call(call: Any, i: int, j: int) -> dict[str, Any]:
    """A tool call as {"name", "arguments": dict}; accepts OpenAI's {"function": {...}} and JSON-string arguments."""
    if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
        call = call["function"]
    where = f"message {i} tool_calls[{j}]"
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str) or not call["name"]:
        raise ValueError(f"{where}: expected {{'name': non-empty str, 'arguments': object}}, got {call!r:.200}")
    args = call.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as e:
            raise ValueError(f"{where}: arguments string is not JSON ({e})") from None
    if not isinstance(args, Mapping):
        raise ValueError(f"{where}: arguments must be a JSON object, got {type(args).__name__}")
    return {"name": call["name"], "arguments": dict(args)}


def format_tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """The canonical text of one tool call, markers included."""
    body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"{tk.TOOL_CALL_BEGIN}{body}{tk.TOOL_CALL_END}"


def render_chat(messages: Sequence[Mapping[str, Any]], tokenizer: tk.Tokenizer, *,
                tools: Optional[Sequence[Mapping]] = None, add_generation_prompt: bool = False) -> RenderedChat:
    """Render messages to ids and a loss mask over assistant content, tool calls and their <|im_end|>."""
    sp = tokenizer.special_id
    ids: list[int] = []
    mask: list[int] = []

    def emit(toks: Sequence[int], learn: bool):
        ids.extend(toks)
        mask.extend([int(learn)] * len(toks))

    def header(role: str, label: str):
        emit([sp(_HEADER_MARKER[role])] + tokenizer.encode(label) + [sp(tk.IM_MIDDLE)], False)

    if tools:
        header("system", "tools")
        emit(tokenizer.encode(json.dumps(list(tools), ensure_ascii=False)) + [sp(tk.IM_END)], False)
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, Mapping) else None
        if role not in ROLES:
            raise ValueError(f"message {i}: role {role!r} is not one of {ROLES}")
        if msg.get("tool_calls") and role != "assistant":
            raise ValueError(f"message {i}: only assistant messages may carry tool_calls, got role {role!r}")
        learn = role == "assistant"
        header(role, (msg.get("name") or "tool") if role == "tool" else role)
        emit(tokenizer.encode(_content(msg, i)), learn)
        for j, call in enumerate(msg.get("tool_calls") or ()):
            c = _normalize_call(call, i, j)
            body = json.dumps(c, ensure_ascii=False)
            emit([sp(tk.TOOL_CALL_BEGIN)] + tokenizer.encode(body) + [sp(tk.TOOL_CALL_END)], learn)
        emit([sp(tk.IM_END)], learn)
    if add_generation_prompt:
        header("assistant", "assistant")
    return RenderedChat(ids, mask)


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One parsed tool call."""

    name: str
    arguments: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ToolCallError:
    """Why the `index`-th tool-call block (0-based, in text order) could not be used; `raw` is its text."""

    index: int
    kind: str  # unterminated | stray_end | invalid_json | not_object | bad_name | bad_arguments | not_text
    message: str
    raw: str = ""


@dataclasses.dataclass(frozen=True)
class ParsedAssistant:
    """Text outside tool calls (stripped), the well-formed calls in order, and an error per malformed block."""

    content: str
    tool_calls: list[ToolCall]
    errors: list[ToolCallError]

    @property
    def ok(self) -> bool:
        """True when every tool-call block parsed."""
        return not self.errors


def parse_assistant(text: str) -> ParsedAssistant:
    """Extract tool calls from generated assistant text; never raises (problems become `errors`)."""
    try:
        return _parse_assistant(text)
    except Exception as e:  # noqa: BLE001 - the contract is to report, never to raise
        return ParsedAssistant("", [], [ToolCallError(0, "not_text", f"{type(e).__name__}: {e}")])


def _parse_assistant(text: str) -> ParsedAssistant:
    """parse_assistant without the safety net."""
    if not isinstance(text, str):
        return ParsedAssistant("", [], [ToolCallError(0, "not_text", f"expected str, got {type(text).__name__}")])
    text = text.split(tk.IM_END, 1)[0]
    content, calls, errors = [], [], []
    pos, index = 0, 0
    while pos < len(text):
        b, e = text.find(tk.TOOL_CALL_BEGIN, pos), text.find(tk.TOOL_CALL_END, pos)
        if b < 0 and e < 0:
            content.append(text[pos:])
            break
        if e >= 0 and (b < 0 or e < b):  # a closing marker with no opening one
            content.append(text[pos:e])
            errors.append(ToolCallError(index, "stray_end", f"{tk.TOOL_CALL_END} without {tk.TOOL_CALL_BEGIN}"))
            index += 1
            pos = e + len(tk.TOOL_CALL_END)
            continue
        content.append(text[pos:b])
        start = b + len(tk.TOOL_CALL_BEGIN)
        e = text.find(tk.TOOL_CALL_END, start)
        nb = text.find(tk.TOOL_CALL_BEGIN, start)
        if e < 0 or 0 <= nb < e:  # runs to the end of the text, or a new call opens first
            stop = len(text) if e < 0 else nb
            errors.append(ToolCallError(index, "unterminated", f"{tk.TOOL_CALL_BEGIN} is never closed",
                                        text[start:stop]))
            index += 1
            pos = stop
            continue
        call, err = _parse_call_body(text[start:e], index)
        (calls if call else errors).append(call or err)
        index += 1
        pos = e + len(tk.TOOL_CALL_END)
    return ParsedAssistant("".join(content).strip(), calls, errors)


def _parse_call_body(raw: str, index: int) -> tuple[Optional[ToolCall], Optional[ToolCallError]]:
    """One call's JSON body -> (ToolCall, None) or (None, ToolCallError)."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as e:
        return None, ToolCallError(index, "invalid_json", f"tool call is not valid JSON: {e}", raw)
    if not isinstance(obj, dict):
        return None, ToolCallError(index, "not_object", f"expected a JSON object, got {type(obj).__name__}", raw)
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, ToolCallError(index, "bad_name", f"'name' must be a non-empty string, got {name!r:.80}", raw)
    args = obj.get("arguments")
    if isinstance(args, str):  # tolerate arguments serialised as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            pass
    if not isinstance(args, dict):
        return None, ToolCallError(index, "bad_arguments",
                                   f"'arguments' must be a JSON object, got {type(args).__name__}", raw)
    return ToolCall(name, args), None
