"""The chat template for SFT and serving: render conversations to tokens + loss mask; parse tool calls back.

Conversations render in the tokenizer's own chat format (`get_chat_format(tokenizer)`, see "chat formats" below and
docs/tokenizers.md): Kimi K2's or DeepSeek-V3's tool-call tokens where the tokenizer defines them, and the project's
markup described here otherwise (the byte tokenizer, and any tokenizer without tool-call tokens of its own).

The project's format (markers are single special tokens; nothing between turns):

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

import abc
import dataclasses
import json
from typing import Any, Mapping, Optional, Sequence, Union

from composer2_jax.data import tokenizer as tk
from composer2_jax.data.tokenizer import (
    DEEPSEEK_TOOL_TOKENS,
    DS_ASSISTANT,
    DS_BOS,
    DS_CALL_BEGIN,
    DS_CALL_END,
    DS_CALLS_BEGIN,
    DS_CALLS_END,
    DS_EOS,
    DS_OUTPUT_BEGIN,
    DS_OUTPUT_END,
    DS_OUTPUTS_BEGIN,
    DS_OUTPUTS_END,
    DS_SEP,
    DS_USER,
    KIMI_ARG_BEGIN,
    KIMI_CALL_BEGIN,
    KIMI_CALL_END,
    KIMI_SECTION_BEGIN,
    KIMI_SECTION_END,
    KIMI_TOOL_TOKENS,
)

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


def format_tool_call(name: str, arguments: Mapping[str, Any], fmt: FormatLike = None, *, index: int = 0) -> str:
    """The canonical text of one tool call, markers included, in `fmt` (a ChatFormat, its name, or a tokenizer
    whose chat format to use; default: the project's markup). `index` is the call's number (Kimi's call id)."""
    return get_chat_format(fmt).format_calls([(name, arguments)], start_index=index)


def render_chat(messages: Sequence[Mapping[str, Any]], tokenizer: tk.Tokenizer, *,
                tools: Optional[Sequence[Mapping]] = None, add_generation_prompt: bool = False,
                continuation: bool = False) -> RenderedChat:
    """Render messages in the tokenizer's chat format (`get_chat_format(tokenizer)`) to ids and a loss mask over the
    assistant's content, tool calls and the token that ends its turn.

    continuation: the messages continue an already rendered conversation (the harness renders a context piece by
    piece), so nothing that only opens a conversation is emitted (DeepSeek-V3's BOS + system prompt).
    """
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, Mapping) else None
        if role not in ROLES:
            raise ValueError(f"message {i}: role {role!r} is not one of {ROLES}")
        if msg.get("tool_calls") and role != "assistant":
            raise ValueError(f"message {i}: only assistant messages may carry tool_calls, got role {role!r}")
    return get_chat_format(tokenizer).render(messages, tokenizer, tools=tools,
                                             add_generation_prompt=add_generation_prompt, continuation=continuation)


def _render_project(messages: Sequence[Mapping[str, Any]], tokenizer: tk.Tokenizer, *,
                    tools: Optional[Sequence[Mapping]] = None, add_generation_prompt: bool = False) -> RenderedChat:
    """The project's markup (see the module docstring)."""
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
        role = msg["role"]
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
    id: str = dataclasses.field(default="", compare=False)  # the native call id (Kimi: functions.{name}:{index})


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


def parse_assistant(text: str, fmt: FormatLike = None) -> ParsedAssistant:
    """Extract tool calls from generated assistant text in `fmt` (a ChatFormat, its name, or a tokenizer; default:
    the project's markup); never raises (problems become `errors`)."""
    try:
        return get_chat_format(fmt).parse(text)
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


# ---------------------------------------------------------------------------------------------------- chat formats
#
# Three markups, chosen from the tokenizer's own special tokens (`detect_chat_format`, `get_chat_format`):
#
# - kimi_k2: Kimi K2's template. Turns are `<|im_system|>/<|im_user|>/<|im_assistant|>{name or role}<|im_middle|>
#   ...<|im_end|>`; tools are declared first in `<|im_system|>tool_declare<|im_middle|>` + KIMI_TOOLS_PREFIX +
#   JSON; an assistant's calls follow its text as `<|tool_calls_section_begin|>` + per call `<|tool_call_begin|>
#   functions.{name}:{index}<|tool_call_argument_begin|>{JSON arguments}<|tool_call_end|>` + `<|tool_calls_section_
#   end|>`, the index counting the calls of the rendered conversation from 0; a tool result is a system-marker turn
#   named after the tool whose text is KIMI_TOOL_RETURN.format(id=tool_call_id, content=...) (tool_call_id defaults to
#   the id of the matching call of the preceding assistant message). Kimi's template injects a default system prompt
#   when the first message is not a system message; render_chat does not (start conversations with a system message).
# - deepseek_v3: DeepSeek-V3's template. `<｜begin▁of▁sentence｜>` + the system messages' text (joined by a blank
#   line; the tool schemas, which V3's template does not render, follow as DEEPSEEK_TOOLS_PREFIX + JSON), then
#   `<｜User｜>{text}` and `<｜Assistant｜>{text}` + calls + `<｜end▁of▁sentence｜>`; calls are `<｜tool▁calls▁begin｜>`
#   + `<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{JSON arguments}\n```<｜tool▁call▁end｜>` (joined by
#   "\n") + `<｜tool▁calls▁end｜>`; consecutive tool results are `<｜tool▁outputs▁begin｜>` + per result
#   `<｜tool▁output▁begin｜>{text}<｜tool▁output▁end｜>` + `<｜tool▁outputs▁end｜>`, and the assistant turn right after
#   tool results has no `<｜Assistant｜>` header (nor does the generation prompt there). Where V3's released template
#   misrenders multi-round tool use (it never resets its "first call"/"first output" flags and drops
#   `<｜tool▁outputs▁end｜>` before a user turn), every round is rendered like the first.
# - project: the markup in the module docstring, for tokenizers that define no tool-call tokens of their own.
#
# Every format encodes message text as plain text (special-token strings in content are never parsed).

# as in Kimi-K2-Instruct-0905's chat_template.jinja (the indentation of the Jinja source is part of the output)
KIMI_TOOLS_PREFIX = "\n  # Tools\n  "
KIMI_TOOL_RETURN = "## Return of {id}\n    {content}"

DEEPSEEK_TOOLS_PREFIX = "## Tools\n"


class ChatFormat(abc.ABC):
    """One chat markup: how conversations render to ids and how a reply's tool calls are parsed back.

    name: "project" | "kimi_k2" | "deepseek_v3"; call_begin: the token that opens a reply's tool calls (the harness
    splits a reply's thinking from its calls there); end: the token that ends an assistant turn (the stop token);
    tokens: every special token the format renders (the tokenizer must define them all); opens_with_bos: rendered
    conversations (continuation=False) start with the tokenizer's BOS.
    """

    name: str = ""
    call_begin: str = ""
    end: str = ""
    tokens: tuple[str, ...] = ()
    opens_with_bos: bool = False  # a rendered conversation already starts with the BOS token (add none before it)

    @abc.abstractmethod
    def render(self, messages, tokenizer, *, tools=None, add_generation_prompt=False,
               continuation=False) -> RenderedChat:
        """Ids and loss mask of already validated messages."""

    @abc.abstractmethod
    def format_calls(self, calls: Sequence[tuple[str, Mapping[str, Any]]], start_index: int = 0) -> str:
        """The text of one reply's tool calls (markers included)."""

    @abc.abstractmethod
    def parse(self, text: str) -> ParsedAssistant:
        """Content, calls and errors of a decoded reply (may raise; `parse_assistant` catches)."""

    def check(self, tokenizer: tk.Tokenizer) -> None:
        """Raise ValueError naming the tokens of this format the tokenizer lacks."""
        missing = [t for t in self.tokens if t not in tokenizer.special_tokens]
        if missing:
            raise ValueError(f"chat format {self.name!r} needs special tokens {missing} that the tokenizer lacks")

    def __repr__(self) -> str:
        return f"ChatFormat({self.name!r})"


class _Emitter:
    """Accumulates ids + mask; text is encoded as plain text, specials by name."""

    def __init__(self, tokenizer: tk.Tokenizer):
        self.tok, self.ids, self.mask = tokenizer, [], []

    def text(self, s: str, learn: bool):
        toks = self.tok.encode(s) if s else []
        self.ids.extend(toks)
        self.mask.extend([int(learn)] * len(toks))

    def sp(self, *names: str, learn: bool):
        for n in names:
            self.ids.append(self.tok.special_id(n))
            self.mask.append(int(learn))

    def result(self) -> RenderedChat:
        return RenderedChat(self.ids, self.mask)


class ProjectFormat(ChatFormat):
    """The project's own markup (module docstring)."""

    name, call_begin, end = "project", tk.TOOL_CALL_BEGIN, tk.IM_END
    tokens = tk.CHAT_SPECIAL_TOKENS

    def render(self, messages, tokenizer, *, tools=None, add_generation_prompt=False, continuation=False):
        return _render_project(messages, tokenizer, tools=tools, add_generation_prompt=add_generation_prompt)

    def format_calls(self, calls, start_index=0):
        return "".join(
            f"{tk.TOOL_CALL_BEGIN}{json.dumps({'name': n, 'arguments': dict(a)}, ensure_ascii=False)}"
            f"{tk.TOOL_CALL_END}" for n, a in calls)

    def parse(self, text):
        return _parse_assistant(text)


def _tool_ids_for(messages: Sequence[Mapping[str, Any]], i: int, ids_by_msg: Mapping[int, list[str]]) -> str:
    """Kimi: the tool_call_id of tool message i, defaulting to the matching call id of the preceding assistant."""
    tcid = messages[i].get("tool_call_id")
    if isinstance(tcid, str) and tcid:
        return tcid
    k, j = 0, i - 1
    while j >= 0 and messages[j]["role"] == "tool":
        k, j = k + 1, j - 1
    calls = ids_by_msg.get(j, []) if j >= 0 else []
    return calls[k] if k < len(calls) else ""


class KimiK2Format(ChatFormat):
    """Kimi K2's markup (see the comment above `ChatFormat`)."""

    name, call_begin, end = "kimi_k2", KIMI_SECTION_BEGIN, tk.IM_END
    tokens = (tk.IM_SYSTEM, tk.IM_USER, tk.IM_ASSISTANT, tk.IM_MIDDLE, tk.IM_END) + KIMI_TOOL_TOKENS

    def render(self, messages, tokenizer, *, tools=None, add_generation_prompt=False, continuation=False):
        self.check(tokenizer)
        e = _Emitter(tokenizer)
        if tools:
            e.sp(tk.IM_SYSTEM, learn=False)
            e.text("tool_declare", False)
            e.sp(tk.IM_MIDDLE, learn=False)
            e.text(KIMI_TOOLS_PREFIX + json.dumps(list(tools), ensure_ascii=False), False)
            e.sp(tk.IM_END, learn=False)
        marker = {"system": tk.IM_SYSTEM, "user": tk.IM_USER, "assistant": tk.IM_ASSISTANT, "tool": tk.IM_SYSTEM}
        n_calls, ids_by_msg = 0, {}
        for i, msg in enumerate(messages):
            role = msg["role"]
            learn = role == "assistant"
            e.sp(marker[role], learn=False)
            e.text(msg.get("name") or role, False)
            e.sp(tk.IM_MIDDLE, learn=False)
            calls = [_normalize_call(c, i, j) for j, c in enumerate(msg.get("tool_calls") or ())]
            if role == "tool":
                tcid = _tool_ids_for(messages, i, ids_by_msg)
                e.text(KIMI_TOOL_RETURN.format(id=tcid, content=_content(msg, i)), False)
            else:
                e.text(_content(msg, i), learn)
            if calls:
                ids_by_msg[i] = []
                e.sp(KIMI_SECTION_BEGIN, learn=True)
                for c in calls:
                    cid = f"functions.{c['name']}:{n_calls}"
                    ids_by_msg[i].append(cid)
                    n_calls += 1
                    e.sp(KIMI_CALL_BEGIN, learn=True)
                    e.text(cid, True)
                    e.sp(KIMI_ARG_BEGIN, learn=True)
                    e.text(json.dumps(c["arguments"], ensure_ascii=False), True)
                    e.sp(KIMI_CALL_END, learn=True)
                e.sp(KIMI_SECTION_END, learn=True)
            e.sp(tk.IM_END, learn=learn)
        if add_generation_prompt:
            e.sp(tk.IM_ASSISTANT, learn=False)
            e.text("assistant", False)
            e.sp(tk.IM_MIDDLE, learn=False)
        return e.result()

    def format_calls(self, calls, start_index=0):
        body = "".join(f"{KIMI_CALL_BEGIN}functions.{n}:{start_index + k}{KIMI_ARG_BEGIN}"
                       f"{json.dumps(dict(a), ensure_ascii=False)}{KIMI_CALL_END}" for k, (n, a) in enumerate(calls))
        return f"{KIMI_SECTION_BEGIN}{body}{KIMI_SECTION_END}"

    def parse(self, text):
        return _parse_sectioned(text, self.end, KIMI_SECTION_BEGIN, KIMI_SECTION_END, KIMI_CALL_BEGIN, KIMI_CALL_END,
                                (KIMI_ARG_BEGIN,), _parse_kimi_call)


class DeepSeekV3Format(ChatFormat):
    """DeepSeek-V3's markup (see the comment above `ChatFormat`)."""

    name, call_begin, end = "deepseek_v3", DS_CALLS_BEGIN, DS_EOS
    opens_with_bos = True
    tokens = (DS_BOS, DS_EOS, DS_USER, DS_ASSISTANT, DS_OUTPUTS_BEGIN, DS_OUTPUT_BEGIN, DS_OUTPUT_END,
              DS_OUTPUTS_END) + DEEPSEEK_TOOL_TOKENS

    def render(self, messages, tokenizer, *, tools=None, add_generation_prompt=False, continuation=False):
        self.check(tokenizer)
        e = _Emitter(tokenizer)
        n_sys = 0
        while n_sys < len(messages) and messages[n_sys]["role"] == "system":
            n_sys += 1
        late = [i for i, m in enumerate(messages) if m["role"] == "system" and i >= n_sys]
        if late:
            raise ValueError(f"message {late[0]}: deepseek_v3 has no system turn after the conversation starts; "
                             "put system messages first")
        system = "\n\n".join(_content(m, i) for i, m in enumerate(messages[:n_sys]))
        if tools:
            system += ("\n\n" if system else "") + DEEPSEEK_TOOLS_PREFIX + json.dumps(list(tools), ensure_ascii=False)
        if continuation and system:
            raise ValueError("deepseek_v3: system messages and tools open a conversation; they cannot continue one")
        if not continuation:
            e.sp(DS_BOS, learn=False)
            e.text(system, False)
        in_tools = False
        for i in range(n_sys, len(messages)):
            msg, role = messages[i], messages[i]["role"]
            if role != "tool" and in_tools:
                e.sp(DS_OUTPUTS_END, learn=False)
            if role == "user":
                e.sp(DS_USER, learn=False)
                e.text(_content(msg, i), False)
            elif role == "assistant":
                if not in_tools:
                    e.sp(DS_ASSISTANT, learn=False)
                e.text(_content(msg, i), True)
                calls = [_normalize_call(c, i, j) for j, c in enumerate(msg.get("tool_calls") or ())]
                if calls:
                    e.sp(DS_CALLS_BEGIN, learn=True)
                    for j, c in enumerate(calls):
                        if j:
                            e.text("\n", True)
                        e.sp(DS_CALL_BEGIN, learn=True)
                        e.text("function", True)
                        e.sp(DS_SEP, learn=True)
                        e.text(_ds_call_text(c["name"], c["arguments"]), True)
                        e.sp(DS_CALL_END, learn=True)
                    e.sp(DS_CALLS_END, learn=True)
                e.sp(DS_EOS, learn=True)
            else:  # tool
                if not in_tools:
                    e.sp(DS_OUTPUTS_BEGIN, learn=False)
                e.sp(DS_OUTPUT_BEGIN, learn=False)
                e.text(_content(msg, i), False)
                e.sp(DS_OUTPUT_END, learn=False)
            in_tools = role == "tool"
        if in_tools:
            e.sp(DS_OUTPUTS_END, learn=False)
        elif add_generation_prompt:
            e.sp(DS_ASSISTANT, learn=False)
        return e.result()

    def format_calls(self, calls, start_index=0):
        body = "\n".join(f"{DS_CALL_BEGIN}function{DS_SEP}{_ds_call_text(n, dict(a))}{DS_CALL_END}" for n, a in calls)
        return f"{DS_CALLS_BEGIN}{body}{DS_CALLS_END}"

    def parse(self, text):
        return _parse_sectioned(text, self.end, DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END,
                                (DS_SEP,), _parse_deepseek_call)


def _ds_call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """DeepSeek-V3's call text after <｜tool▁sep｜>: the name, then the arguments in a ```json fence."""
    return f"{name}\n```json\n{json.dumps(dict(arguments), ensure_ascii=False)}\n```"


PROJECT, KIMI_K2, DEEPSEEK_V3 = ProjectFormat(), KimiK2Format(), DeepSeekV3Format()
CHAT_FORMATS = {f.name: f for f in (PROJECT, KIMI_K2, DEEPSEEK_V3)}
FormatLike = Union[ChatFormat, str, tk.Tokenizer, None]


def rewrite_tool_calls(text: str, fmt: FormatLike, start_index: int = 0) -> str:
    """Text written in the project's markup (scripted agents, oracle transcripts) with every well-formed call block
    rewritten in `fmt`; consecutive calls (only whitespace between them) share one native section. Malformed blocks
    are left as they are; for the project format the text is returned unchanged."""
    fmt = get_chat_format(fmt)
    if fmt is PROJECT:
        return text
    pieces: list = []  # str | (name, arguments)
    pos = 0
    while True:
        b = text.find(tk.TOOL_CALL_BEGIN, pos)
        e = text.find(tk.TOOL_CALL_END, b + len(tk.TOOL_CALL_BEGIN)) if b >= 0 else -1
        if b < 0 or e < 0:
            pieces.append(text[pos:])
            break
        call, _ = _parse_call_body(text[b + len(tk.TOOL_CALL_BEGIN):e], 0)
        nb = text.find(tk.TOOL_CALL_BEGIN, b + len(tk.TOOL_CALL_BEGIN))
        if call is None or 0 <= nb < e:
            pieces.append(text[pos:b + len(tk.TOOL_CALL_BEGIN)])
            pos = b + len(tk.TOOL_CALL_BEGIN)
            continue
        pieces += [text[pos:b], (call.name, call.arguments)]
        pos = e + len(tk.TOOL_CALL_END)
    out: list[str] = []
    run: list = []
    gap = ""  # whitespace after a call, dropped if another call follows (the calls then share a section)

    def flush():
        nonlocal start_index
        if run:
            out.append(fmt.format_calls(run, start_index))
            start_index += len(run)
            run.clear()

    for piece in pieces:
        if isinstance(piece, tuple):
            run.append(piece)
            gap = ""
        elif run and not piece.strip():
            gap += piece
        else:
            flush()
            out.append(gap + piece)
            gap = ""
    flush()
    out.append(gap)
    return "".join(out)


def end_token_id(tokenizer: tk.Tokenizer) -> int:
    """Id of the token that ends an assistant turn in the tokenizer's chat format (the rollout stop token)."""
    return tokenizer.special_id(get_chat_format(tokenizer).end)


def detect_chat_format(tokenizer: tk.Tokenizer) -> ChatFormat:
    """kimi_k2 when the tokenizer defines Kimi's tool-call tokens, deepseek_v3 when it defines DeepSeek-V3's,
    project otherwise (tokenizer.native_tool_markup)."""
    return CHAT_FORMATS[tk.native_tool_markup(tokenizer.special_tokens)]


def get_chat_format(fmt: FormatLike = None) -> ChatFormat:
    """A ChatFormat from itself, its name, a tokenizer (detected from its special tokens) or None (the project's
    markup)."""
    if fmt is None:
        return PROJECT
    if isinstance(fmt, ChatFormat):
        return fmt
    if isinstance(fmt, tk.Tokenizer):  # detected once from its special tokens, then kept on the tokenizer
        found = fmt.__dict__.get("_chat_format")
        if found is None:
            found = fmt.__dict__["_chat_format"] = detect_chat_format(fmt)
        return found
    if isinstance(fmt, str) and fmt in CHAT_FORMATS:
        return CHAT_FORMATS[fmt]
    raise ValueError(f"unknown chat format {fmt!r}; expected one of {sorted(CHAT_FORMATS)}, a ChatFormat or a "
                     "tokenizer")


def _parse_sectioned(text: str, end: str, sec_begin: str, sec_end: str, call_begin: str, call_end: str,
                     inner: tuple[str, ...], parse_call) -> ParsedAssistant:
    """Native markup: calls live in sections `sec_begin (call_begin body call_end)* sec_end`.

    Errors (kinds as for the project markup): a call or section that is never closed -> unterminated; a closing or
    call marker outside a section -> stray_end; anything in a section that is not a call (or a call without its
    argument marker) -> not_object; arguments that are not JSON -> invalid_json, not an object -> bad_arguments;
    no usable name -> bad_name.
    """
    if not isinstance(text, str):
        return ParsedAssistant("", [], [ToolCallError(0, "not_text", f"expected str, got {type(text).__name__}")])
    text = text.split(end, 1)[0]
    markers = (sec_end, call_begin, call_end) + inner
    content, calls, errors = [], [], []
    index = 0

    def add(call: Optional[ToolCall], err: Optional[ToolCallError]):
        nonlocal index
        (calls if call else errors).append(call or err)
        index += 1

    def outside(seg: str):
        """Text outside sections: content, with stray markers reported and dropped."""
        pos = 0
        while True:
            hits = [(seg.find(m, pos), m) for m in markers if seg.find(m, pos) >= 0]
            if not hits:
                content.append(seg[pos:])
                return
            at, m = min(hits)
            content.append(seg[pos:at])
            add(None, ToolCallError(index, "stray_end", f"{m} outside a {sec_begin}...{sec_end} section"))
            pos = at + len(m)

    pos = 0
    while pos <= len(text):
        sb = text.find(sec_begin, pos)
        if sb < 0:
            outside(text[pos:])
            break
        outside(text[pos:sb])
        start = sb + len(sec_begin)
        se = text.find(sec_end, start)
        nsb = text.find(sec_begin, start)
        closed = se >= 0 and not 0 <= nsb < se
        stop = se if closed else (nsb if nsb >= 0 else len(text))
        body, p, n_before, open_call = text[start:stop], 0, index, False
        while p < len(body):
            cb = body.find(call_begin, p)
            junk = body[p:cb if cb >= 0 else len(body)]
            if junk.strip():
                add(None, ToolCallError(index, "not_object", f"text in a tool-call section outside {call_begin}..."
                                                             f"{call_end}", junk))
            if cb < 0:
                break
            s = cb + len(call_begin)
            ce, ncb = body.find(call_end, s), body.find(call_begin, s)
            if ce < 0 or 0 <= ncb < ce:
                cut = len(body) if ce < 0 else ncb
                add(None, ToolCallError(index, "unterminated", f"{call_begin} is never closed by {call_end}",
                                        body[s:cut]))
                open_call, p = True, cut
                continue
            add(*parse_call(body[s:ce], index))
            p = ce + len(call_end)
        if index == n_before and closed:
            add(None, ToolCallError(index, "not_object", f"empty {sec_begin}{sec_end} section"))
        if not closed and not open_call:
            add(None, ToolCallError(index, "unterminated", f"{sec_begin} is never closed by {sec_end}", body))
        pos = stop + (len(sec_end) if closed else 0)
        if not closed and stop == len(text):
            break
    return ParsedAssistant("".join(content).strip(), calls, errors)


def _call_arguments(raw: str, body: str, index: int) -> tuple[Optional[dict], Optional[ToolCallError]]:
    """A call's JSON arguments -> (dict, None) or (None, error)."""
    try:
        args = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError) as e:
        return None, ToolCallError(index, "invalid_json", f"tool-call arguments are not valid JSON: {e}", body)
    if not isinstance(args, dict):
        return None, ToolCallError(index, "bad_arguments",
                                   f"tool-call arguments must be a JSON object, got {type(args).__name__}", body)
    return args, None


def _parse_kimi_call(body: str, index: int) -> tuple[Optional[ToolCall], Optional[ToolCallError]]:
    """`functions.{name}:{index}<|tool_call_argument_begin|>{JSON}`."""
    if KIMI_ARG_BEGIN not in body:
        return None, ToolCallError(index, "not_object", f"tool call without {KIMI_ARG_BEGIN}", body)
    cid, raw = body.split(KIMI_ARG_BEGIN, 1)
    cid = cid.strip()
    name = cid[len("functions."):] if cid.startswith("functions.") else cid
    head, sep, tail = name.rpartition(":")
    if sep and tail.isdigit():
        name = head
    if not name.strip() or any(ch.isspace() for ch in name):
        return None, ToolCallError(index, "bad_name", f"tool-call id {cid!r:.80} names no function", body)
    args, err = _call_arguments(raw, body, index)
    return (ToolCall(name, args, cid), None) if err is None else (None, err)


def _parse_deepseek_call(body: str, index: int) -> tuple[Optional[ToolCall], Optional[ToolCallError]]:
    """`function<｜tool▁sep｜>{name}\\n```json\\n{JSON}\\n````."""
    if DS_SEP not in body:
        return None, ToolCallError(index, "not_object", f"tool call without {DS_SEP}", body)
    kind, rest = body.split(DS_SEP, 1)
    if kind.strip() != "function":
        return None, ToolCallError(index, "not_object", f"tool-call type {kind.strip()!r:.40}; expected 'function'",
                                   body)
    name, _, raw = rest.partition("\n")
    if not name.strip() or any(ch.isspace() for ch in name.strip()):
        return None, ToolCallError(index, "bad_name", f"tool call names no function ({name!r:.80})", body)
    raw = raw.strip()
    if raw.startswith("```"):
        raw = raw[3:]
        raw = raw[4:] if raw.startswith("json") else raw
        if not raw.rstrip().endswith("```"):
            return None, ToolCallError(index, "invalid_json", "tool-call arguments: ```json fence is never closed",
                                       body)
        raw = raw.rstrip()[:-3]
    args, err = _call_arguments(raw, body, index)
    return (ToolCall(name.strip(), args), None) if err is None else (None, err)
