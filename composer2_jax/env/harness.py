"""The agent loop shared by RL rollouts and evaluation: model text ⇄ tool calls ⇄ sandbox observations.

One episode on one sandbox:

1. The context starts as system prompt (with the env's tool schemas) + the task, rendered by `data.chat.render_chat`,
   ending in the assistant header (the generation prompt).
2. The policy continues the context; its ids are decoded and `parse_assistant` extracts the tool calls. Everything
   is in the tokenizer's chat format (`data.chat.get_chat_format`: Kimi K2's or DeepSeek-V3's own tool-call tokens
   where the tokenizer defines them, the project's markup otherwise; see data/chat.py).
3. Each call runs through `Environment.call`; a malformed block (bad JSON, no name, ...) is answered with the env's
   structured error observation (`Observation.failure`) without reaching the sandbox, and counted. Observations are
   rendered as tool messages and appended to the context.
4. Stop at `submit`, at a reply with no tool call, at max turns, at the generated-token budget or the wall-clock
   limit. Past `context_budget` tokens the model is asked to summarise its work and the context restarts from
   system + task + summary (`rl.trajectory.SegmentBuilder`), so the transcript is an `rl.trajectory.Episode` the
   RL trainer packs directly.
5. Checkpoints (`run_episode(..., options=EpisodeOptions(checkpoints=True))`): at every turn boundary the episode
   continues from (after a reply's tool observations) the sandbox's files are snapshotted and the harness state
   copied into a `TurnCheckpoint`; `resume_episode` continues from one on a fresh fork of its snapshot, with the
   token context, turn count, todo list, summaries and effort so far restored exactly. Bubblewrap snapshots hold
   files, not processes: a resumed branch has none of the processes the parent started; on the VM backend
   (`SandboxConfig(backend="vm")`) snapshots hold memory, and a branch resumes with them running (docs/env.md).

The context is the exact token sequence the model saw: the model's own sampled ids (never a re-rendering of them)
interleaved with rendered prompts and observations. A policy is anything with
`generate(prompt_ids, max_new_tokens) -> ids | Completion`; ids without log-probs are taken as deterministic
(log μ = 0), which is exact for scripted agents; RL policies must return `Completion` with the sampler's log-probs.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import (
    ParsedAssistant,
    ToolCall,
    ToolCallError,
    get_chat_format,
    parse_assistant,
    render_chat,
)
from composer2_jax.env.observation import Observation
from composer2_jax.episode import Episode, SegmentBuilder

SYSTEM_PROMPT = (
    "You are an expert software engineer working in a sandboxed Linux machine. The repository is at /workspace "
    "(your working directory). Use the tools to read code, run commands and edit files; nothing else changes the "
    "machine. Investigate before you change things, keep changes minimal and run the relevant checks. There is no "
    "network access. When the task is done, call submit with a short summary: the workspace as you leave it is "
    "your answer.")
SUMMARY_PROMPT = (
    "Your context is full. Write a summary of your progress so far that lets you continue without the earlier "
    "messages: the task, what you found (files, causes, commands that matter), what you changed, and what remains. "
    "Do not call tools in this reply.")
CONTINUE_PROMPT = "Continue the task from your summary above."
STOP_REASONS = ("submitted", "no_tool_call", "max_turns", "token_budget", "timeout", "summary_limit")
# parse_assistant's error kinds -> the env's observation error kinds (composer2_jax.env.observation.ERROR_KINDS)
_PARSE_ERROR_KIND = {"unterminated": "bad_json", "stray_end": "bad_json", "invalid_json": "bad_json",
                     "not_object": "bad_json", "not_text": "bad_json", "bad_arguments": "bad_json",
                     "bad_name": "unknown_tool"}
# observation error kinds that mean the call itself was malformed (as opposed to a failing well-formed call)
MALFORMED_KINDS = ("bad_json", "unknown_tool", "invalid_arguments")


@dataclasses.dataclass(frozen=True)
class Completion:
    """A policy's reply: sampled ids, their log μ (None: deterministic), and the policy version that sampled them."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None = None
    policy_version: int = 0


@runtime_checkable
class Policy(Protocol):
    """Anything that continues a token context (an inference engine, a scripted agent)."""

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int) -> Sequence[int] | Completion:
        """Ids continuing prompt_ids (at most max_new_tokens; ending at <|im_end|> when the reply is complete)."""


@dataclasses.dataclass(frozen=True)
class HarnessConfig:
    """Limits and prompts of one episode."""

    max_turns: int = 50  # model replies (summaries not counted)
    max_new_tokens: int = 4096  # per reply
    max_total_tokens: int = 200_000  # generated tokens in the whole episode (summaries included)
    context_budget: int = 32_768  # summarise when the current context reaches this many tokens
    max_summaries: int = 8  # stop when the context overflows again after this many summaries
    summary_tokens: int = 2048  # most tokens a summary may take
    timeout_s: float | None = None  # wall-clock limit of the episode (the task's [agent] timeout_sec)
    max_observation_chars: int = 20_000  # longer tool output is cut in the middle before the model sees it
    system_prompt: str = SYSTEM_PROMPT  # the system message of every segment (tool schemas are appended after it)
    summary_prompt: str = SUMMARY_PROMPT  # the user message asking for a self-summary when the context is full

    def __post_init__(self):
        for name in ("max_turns", "max_new_tokens", "max_total_tokens", "context_budget", "summary_tokens",
                     "max_observation_chars"):
            if getattr(self, name) <= 0:
                raise ValueError(f"HarnessConfig.{name}={getattr(self, name)}; expected a positive number")
        if self.max_summaries < 0:
            raise ValueError(f"HarnessConfig.max_summaries={self.max_summaries}; expected >= 0")


@dataclasses.dataclass(frozen=True)
class EpisodeOptions:
    """How one episode is labelled and recorded (`run_episode`, `resume_episode`); its limits are `HarnessConfig`."""

    task_id: str = ""  # the trainer's Episode.task_id
    group_id: Any = 0  # the trainer's Episode.group_id (the episodes one advantage group compares)
    checkpoints: bool = False  # keep a `TurnCheckpoint` (sandbox snapshot + harness state) at every turn boundary


@dataclasses.dataclass(frozen=True)
class ToolCallRecord:
    """One tool-call block of a reply, what it did and what came back."""

    turn: int
    name: str | None  # None when the block had no usable name
    arguments: dict[str, Any] | None
    ok: bool
    error: str | None  # the observation's error kind
    malformed: bool  # the call itself was unusable (bad JSON, unknown tool, invalid arguments)
    message: str  # first line(s) of the observation, for logs
    exit_code: int | None = None  # run_terminal_cmd: the command's exit code (None for other tools)
    # files the call produced, kept with the episode (a screenshot's PNG: env/desktop/host.py documents the keys)
    artifacts: tuple[dict[str, Any], ...] = ()

    @property
    def failed(self) -> bool:
        """A failure signal: an error observation, a malformed call, or a command that exited non-zero."""
        return self.error is not None or self.malformed or self.exit_code not in (None, 0)

    def to_dict(self, data: bool = True) -> dict[str, Any]:
        """JSON-ready dict (data=False: artifacts without their base64 data)."""
        out = dataclasses.asdict(self)
        if not data:
            out["artifacts"] = [{k: v for k, v in a.items() if k != "data_b64"} for a in self.artifacts]
        return out


@dataclasses.dataclass
class EpisodeResult:
    """Everything one episode produced: the trainer's Episode, the readable transcript, counts and the stop reason."""

    episode: Episode
    messages: list[dict[str, Any]]
    stop_reason: str
    turns: int
    tool_calls: list[ToolCallRecord]
    generated_tokens: int
    observation_tokens: int
    max_context_tokens: int
    summaries: int
    wall_s: float
    submitted: bool
    checkpoints: list[TurnCheckpoint] = dataclasses.field(default_factory=list)  # run with checkpoints=True
    start_turn: int = 0  # the checkpoint's turn this run resumed from (0: the task's start)

    @property
    def malformed(self) -> int:
        """Number of malformed tool calls."""
        return sum(r.malformed for r in self.tool_calls)

    @property
    def thinking(self) -> str:
        """The model's reasoning text: what it wrote around its tool calls, and its self-summaries."""
        return "\n".join(m["content"] for m in self.messages if m["role"] == "assistant" and m["content"]
                         and (m.get("tool_calls") or m.get("summary")))

    @property
    def final_message(self) -> str:
        """The answer to the user: the last reply if it called no tool, else the summary it gave to submit."""
        last = next((m for m in reversed(self.messages) if m["role"] == "assistant" and not m.get("summary")), None)
        if last is None:
            return ""
        if not last["tool_calls"]:
            return last["content"]
        submit = [c["arguments"] for c in last["tool_calls"]
                  if c["name"] == "submit" and isinstance(c["arguments"], dict)]
        summary = submit[-1].get("summary") if submit else None
        return summary if isinstance(summary, str) else ""

    @property
    def tool_call_errors(self) -> list[str | None]:
        """Observation error kind per tool call (None = succeeded), as `rl.rewards.EpisodeOutcome` takes them."""
        return [r.error for r in self.tool_calls]

    @property
    def artifacts(self) -> list[dict[str, Any]]:
        """Every artifact of the episode's tool calls (screenshots), in call order, each with its "turn"."""
        return [{**a, "turn": r.turn} for r in self.tool_calls for a in r.artifacts]

    def save_artifacts(self, folder: str | os.PathLike) -> list[str]:
        """Write each artifact's bytes to folder/<its name> (a screenshot: a .png file); the paths written."""
        os.makedirs(folder, exist_ok=True)
        paths = []
        for a in self.artifacts:
            path = os.path.join(folder, os.path.basename(a["name"]))
            with open(path, "wb") as f:
                f.write(base64.b64decode(a["data_b64"]))
            paths.append(path)
        return paths

    def malformed_report(self) -> str:
        """One line: how many calls were malformed and of which kinds ('' when none)."""
        kinds = collections.Counter(r.error for r in self.tool_calls if r.malformed)
        if not kinds:
            return ""
        return f"{sum(kinds.values())} malformed tool call(s): " + ", ".join(f"{k}×{n}" for k, n in kinds.items())

    def summary(self) -> dict[str, Any]:
        """Counts for result tables (no transcript)."""
        return {"stop_reason": self.stop_reason, "turns": self.turns, "tool_calls": len(self.tool_calls),
                "malformed": self.malformed, "generated_tokens": self.generated_tokens,
                "observation_tokens": self.observation_tokens, "max_context_tokens": self.max_context_tokens,
                "summaries": self.summaries, "wall_s": round(self.wall_s, 3), "submitted": self.submitted}


@dataclasses.dataclass(frozen=True)
class TurnCheckpoint:
    """An episode at a turn boundary (after reply `turn` and its tool observations); see `resume_episode`.

    The sandbox's files are an environment snapshot; everything else is the harness's state at the boundary, kept
    as private copies so that any number of resumes start from the same state.
    """

    turn: int  # model replies so far (summaries not counted)
    snapshot: str  # the environment's snapshot id of the sandbox's files
    env_state: dict[str, Any]  # the sandbox's episode state: todos, submission, call and error counts
    builder: SegmentBuilder  # the trainer's segments and the current context (copied again on every resume)
    messages: tuple[dict[str, Any], ...]  # the readable transcript so far
    tool_calls: tuple[ToolCallRecord, ...]
    generated_tokens: int
    observation_tokens: int
    summaries: int
    max_context_tokens: int
    elapsed_s: float  # wall-clock time of the episode so far (the timeout keeps counting from it)
    snapshot_s: float  # what taking this checkpoint cost (snapshot + state copy)

    @property
    def context(self) -> list[int]:
        """The token context the next reply continues."""
        return self.builder.context

    def state(self) -> dict[str, Any]:
        """The harness state as plain data (for equality checks): everything but the snapshot id and timings."""
        return {"turn": self.turn, "env_state": self.env_state, "context": self.context,
                "closed_segments": self.builder.closed_segments,
                "current_turns": self.builder.current_turns, "messages": list(self.messages),
                "tool_calls": list(self.tool_calls), "generated_tokens": self.generated_tokens,
                "observation_tokens": self.observation_tokens, "summaries": self.summaries,
                "max_context_tokens": self.max_context_tokens}


# ---------------------------------------------------------------------------------------------------- rendering


def generation_header(tokenizer: tk.Tokenizer) -> list[int]:
    """The assistant header that prompts a reply (after a user turn)."""
    return render_chat([], tokenizer, add_generation_prompt=True, continuation=True).ids


def _render(messages: list[dict], tokenizer: tk.Tokenizer, tools=None, prompt: bool = False,
            continuation: bool = True) -> list[int]:
    """Ids of some messages (with the tool schemas first if given; the generation header last if prompt); all but
    the first piece of a context continue it."""
    return render_chat(messages, tokenizer, tools=tools, add_generation_prompt=prompt, continuation=continuation).ids


def is_summary_request(prompt_text: str, config: HarnessConfig = HarnessConfig(),
                       tokenizer: tk.Tokenizer | None = None) -> bool:
    """True if a decoded prompt ends with the summary request (scripted agents use this to answer it); pass the
    tokenizer for any chat format other than the project's."""
    if tokenizer is None:
        tail = f"{config.summary_prompt}{tk.IM_END}{tk.IM_ASSISTANT}assistant{tk.IM_MIDDLE}"
    else:
        tail = tokenizer.decode(_render([{"role": "user", "content": config.summary_prompt}], tokenizer, prompt=True))
    return prompt_text.endswith(tail)


def clip_text(text: str, limit: int) -> str:
    """text, or its head and tail around a marker when longer than limit characters."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def _normalize(out: Sequence[int] | Completion) -> Completion:
    """A policy's output as a Completion; bare ids get log μ = 0 (deterministic)."""
    if isinstance(out, Completion):
        comp = out
    else:
        comp = Completion(tuple(int(i) for i in out))
    if comp.logprobs is None:
        comp = dataclasses.replace(comp, logprobs=(0.0,) * len(comp.ids))
    if len(comp.logprobs) != len(comp.ids):
        raise ValueError(f"policy returned {len(comp.ids)} ids but {len(comp.logprobs)} logprobs; expected equal")
    return comp


# ---------------------------------------------------------------------------------------------------- episode


class _Run:
    """State of one episode while it runs (see `run_episode`)."""

    def __init__(self, env, sid: str, policy: Policy, tokenizer: tk.Tokenizer, config: HarnessConfig,
                 builder: SegmentBuilder, messages: list[dict[str, Any]]):
        self.env, self.sid, self.policy, self.tok, self.cfg = env, sid, policy, tokenizer, config
        self.fmt = get_chat_format(tokenizer)
        self.im_end = tokenizer.special_id(self.fmt.end)  # the token that ends a reply (<|im_end|>, DeepSeek's EOS)
        self.call_begin = tokenizer.special_id(self.fmt.call_begin)
        self.builder, self.messages = builder, messages
        self.records: list[ToolCallRecord] = []
        self.turns = self.generated = self.observed = self.summaries = self.max_context = 0
        self.submitted = False
        self.checkpoints: list[TurnCheckpoint] = []
        self.start_turn = 0
        self.start = time.monotonic()

    @classmethod
    def fresh(cls, env, sid: str, instruction: str, policy: Policy, tokenizer: tk.Tokenizer,
              config: HarnessConfig) -> _Run:
        """An episode at the task's start: context = system prompt (+ tool schemas) + task."""
        system = {"role": "system", "content": config.system_prompt}
        task = {"role": "user", "content": instruction}
        prefix = (_render([system], tokenizer, tools=env.tools(), continuation=False),
                  _render([task], tokenizer, prompt=True),
                  _render([{"role": "user", "content": config.summary_prompt}], tokenizer, prompt=True))
        need = sum(map(len, prefix))
        if need >= config.context_budget:
            raise ValueError(f"the system prompt with the tool schemas ({len(prefix[0])} tokens), the task "
                             f"({len(prefix[1])}) and the summary prompt ({len(prefix[2])}) need {need} tokens, not "
                             f"less than context_budget={config.context_budget}; use a model with a longer context "
                             "(or a tokenizer with fewer tokens per character)")
        return cls(env, sid, policy, tokenizer, config, SegmentBuilder(*prefix, config.context_budget),
                   [system, task])

    @classmethod
    def resumed(cls, env, sid: str, ckpt: TurnCheckpoint, policy: Policy, tokenizer: tk.Tokenizer,
                config: HarnessConfig) -> _Run:
        """An episode continuing from a checkpoint: its harness state copied back (the sandbox is the caller's)."""
        run = cls(env, sid, policy, tokenizer, config, ckpt.builder.fork(), list(ckpt.messages))
        run.records = list(ckpt.tool_calls)
        run.turns = run.start_turn = ckpt.turn
        run.generated, run.observed = ckpt.generated_tokens, ckpt.observation_tokens
        run.summaries, run.max_context = ckpt.summaries, ckpt.max_context_tokens
        run.start = time.monotonic() - ckpt.elapsed_s
        return run

    def checkpoint(self) -> TurnCheckpoint:
        """Snapshot the sandbox's files and copy the harness state (call at a turn boundary only)."""
        t0 = time.monotonic()
        snap = self.env.snapshot(self.sid)
        ckpt = TurnCheckpoint(self.turns, snap, self.env.episode(self.sid), self.builder.fork(), tuple(self.messages),
                              tuple(self.records), self.generated, self.observed, self.summaries, self.max_context,
                              t0 - self.start, 0.0)
        return dataclasses.replace(ckpt, snapshot_s=time.monotonic() - t0)

    def drive(self, checkpoints: bool) -> str:
        """Run replies until a stop reason; with checkpoints, one `TurnCheckpoint` per boundary continued from
        (if the episode raises, their snapshots are deleted: nobody else holds them)."""
        try:
            stop = self._stop_reason()
            while stop is None:
                stop = self.step()
                if stop is None and checkpoints:
                    self.checkpoints.append(self.checkpoint())
        except BaseException:
            for ckpt in self.checkpoints:
                with contextlib.suppress(Exception):  # the environment may be what failed
                    self.env.delete_snapshot(ckpt.snapshot)
            raise
        return stop

    def _generate(self, budget: int) -> Completion:
        """Sample from the current context; counts tokens and context size."""
        context = self.builder.context
        self.max_context = max(self.max_context, len(context))
        comp = _normalize(self.policy.generate(context, budget))
        comp = dataclasses.replace(comp, ids=comp.ids[:budget], logprobs=comp.logprobs[:budget])
        self.generated += len(comp.ids)
        return comp

    def _append_reply(self, comp: Completion, has_calls: bool) -> None:
        """Add a reply as trainable turns: thinking before the first tool call, then the calls (or a message)."""
        ids, lp, v = comp.ids, comp.logprobs, comp.policy_version
        cut = ids.index(self.call_begin) if self.call_begin in ids else len(ids)
        pieces = [("thinking", 0, cut), ("tool_call", cut, len(ids))] if has_calls else [("message", 0, len(ids))]
        for role, a, b in pieces:
            if b > a:
                self.builder.append(ids[a:b], True, lp[a:b], role=role, policy_version=v)

    def _stop_reason(self) -> str | None:
        """Why the episode must stop before the next reply, if it must."""
        if self.turns >= self.cfg.max_turns:
            return "max_turns"
        if self.generated >= self.cfg.max_total_tokens:
            return "token_budget"
        if self.cfg.timeout_s is not None and time.monotonic() - self.start >= self.cfg.timeout_s:
            return "timeout"
        return None

    def step(self) -> str | None:
        """One reply and its tool calls; a stop reason when the episode ends."""
        comp = self._generate(min(self.cfg.max_new_tokens, self.cfg.max_total_tokens - self.generated))
        self.turns += 1
        parsed = parse_assistant(self.tok.decode(comp.ids), self.fmt)
        blocks = _blocks(parsed)
        self._append_reply(comp, bool(blocks))
        self.messages.append({"role": "assistant", "content": parsed.content,
                              "tool_calls": [{"name": c.name, "arguments": c.arguments}
                                             for c in parsed.tool_calls]})
        closing = [] if comp.ids and comp.ids[-1] == self.im_end else [self.im_end]
        if not blocks:
            if closing:
                self.builder.append(closing, False, role="tool_output")
            return "no_tool_call"
        tool_msgs = [self._execute(block) for block in blocks]
        self.messages.extend(tool_msgs)
        obs_ids = closing + _render(tool_msgs, self.tok)
        header = _render(tool_msgs, self.tok, prompt=True)[len(obs_ids) - len(closing):]  # DeepSeek: none
        self.observed += len(obs_ids)
        stop = "submitted" if self.submitted else self._stop_reason()
        overflow = len(self.builder.context) + len(obs_ids) + len(header) >= self.cfg.context_budget
        self.builder.append(obs_ids + ([] if stop or overflow else header), False, role="tool_output")
        if stop is None and overflow:
            stop = self._summarize()
        return stop

    def _execute(self, block: ToolCall | ToolCallError) -> dict[str, Any]:
        """Run one call (or answer a malformed block with an error observation); the tool message for the model."""
        call_id = ""
        if isinstance(block, ToolCallError):
            name, args = None, None
            kind = _PARSE_ERROR_KIND.get(block.kind, "bad_json")
            obs = Observation.failure(kind, f"malformed tool call ({block.kind}): {block.message}",
                                      raw=block.raw[:2000])
        else:
            name, args = block.name, block.arguments
            call_id = block.id
            obs = self.env.call(self.sid, name, args)
            self.submitted = self.submitted or (name == "submit" and obs.ok)
        exit_code = obs.fields.get("exit_code") if name == "run_terminal_cmd" else None
        self.records.append(ToolCallRecord(self.turns, name, args, obs.ok, obs.error, obs.error in MALFORMED_KINDS,
                                           obs.content[:300], exit_code, tuple(obs.fields.get("artifacts") or ())))
        content = clip_text(obs.content, self.cfg.max_observation_chars)
        msg = {"role": "tool", "name": name or "tool", "content": content}
        if call_id:  # native call ids (Kimi's functions.{name}:{index}) are echoed in the result turn
            msg["tool_call_id"] = call_id
        return msg

    def _summarize(self) -> str | None:
        """Ask for a summary and restart the context from system + task + summary; a stop reason if it cannot."""
        if self.summaries >= self.cfg.max_summaries:
            return "summary_limit"
        context = self.builder.request_summary()
        self.max_context = max(self.max_context, len(context))
        budget = min(self.cfg.summary_tokens, max(1, self.cfg.max_total_tokens - self.generated))
        comp = _normalize(self.policy.generate(context, budget))
        comp = dataclasses.replace(comp, ids=comp.ids[:budget], logprobs=comp.logprobs[:budget])
        self.generated += len(comp.ids)
        self.builder.add_summary(comp.ids, comp.logprobs, comp.policy_version)
        self.summaries += 1
        text = parse_assistant(self.tok.decode(comp.ids), self.fmt).content
        self.messages += [{"role": "user", "content": self.cfg.summary_prompt},
                          {"role": "assistant", "content": text, "summary": True},
                          {"role": "user", "content": CONTINUE_PROMPT}]
        closing = [] if comp.ids and comp.ids[-1] == self.im_end else [self.im_end]
        self.builder.append(closing + _render([{"role": "user", "content": CONTINUE_PROMPT}], self.tok, prompt=True),
                            False, role="user")
        return self._stop_reason()

    def result(self, stop: str, task_id: str, group_id: Any) -> EpisodeResult:
        """Close the episode."""
        episode = self.builder.finish(task_id=task_id, group_id=group_id)
        return EpisodeResult(episode, self.messages, stop, self.turns, self.records, self.generated, self.observed,
                             self.max_context, self.summaries, time.monotonic() - self.start, self.submitted,
                             self.checkpoints, self.start_turn)


def _blocks(parsed: ParsedAssistant) -> list[ToolCall | ToolCallError]:
    """Well-formed calls and malformed blocks interleaved in text order."""
    errors = {e.index: e for e in parsed.errors}
    calls = iter(parsed.tool_calls)
    return [errors[i] if i in errors else next(calls) for i in range(len(parsed.tool_calls) + len(errors))]


def run_episode(env, sid: str, instruction: str, policy: Policy, tokenizer: tk.Tokenizer,
                config: HarnessConfig = HarnessConfig(), options: EpisodeOptions = EpisodeOptions()) -> EpisodeResult:
    """Drive `policy` on sandbox `sid` until it submits or a limit is hit; see the module docstring.

    `options.checkpoints`: snapshot the sandbox and keep a `TurnCheckpoint` at every turn boundary
    (`EpisodeResult.checkpoints`; the caller deletes their snapshots when done with them).
    """
    run = _Run.fresh(env, sid, instruction, policy, tokenizer, config)
    return run.result(run.drive(options.checkpoints), options.task_id, options.group_id)


def fork_checkpoint(env, checkpoint: TurnCheckpoint) -> str:
    """A new sandbox in the checkpoint's state: a fork of its snapshot with the episode state (todos, counts) set,
    whose workspace changes count from where the checkpointed episode started."""
    sid = env.fork(checkpoint.snapshot, keep_origin=True)
    try:
        env.set_episode(sid, checkpoint.env_state)
    except Exception:
        env.close(sid)
        raise
    return sid


def resume_episode(env, sid: str, checkpoint: TurnCheckpoint, policy: Policy, tokenizer: tk.Tokenizer,
                   config: HarnessConfig = HarnessConfig(),
                   options: EpisodeOptions = EpisodeOptions()) -> EpisodeResult:
    """Continue an episode from `checkpoint` on `sid` (a `fork_checkpoint` sandbox) as `run_episode` would have.

    The result is the whole episode: the checkpoint's turns, transcript, tool calls and counts, then the new ones.
    """
    if checkpoint.builder.context_budget != config.context_budget:
        raise ValueError(f"the checkpoint was taken with context_budget={checkpoint.builder.context_budget}; "
                         f"config has {config.context_budget}; expected equal")
    run = _Run.resumed(env, sid, checkpoint, policy, tokenizer, config)
    return run.result(run.drive(options.checkpoints), options.task_id, options.group_id)


def transcript_jsonl(result: EpisodeResult) -> str:
    """The readable transcript, one JSON message per line, then the tool-call records and the counts (artifacts
    are listed without their bytes: `EpisodeResult.save_artifacts` writes those)."""
    lines = [json.dumps(m, ensure_ascii=False) for m in result.messages]
    lines += [json.dumps({"tool_call_record": r.to_dict(data=False)}, ensure_ascii=False) for r in result.tool_calls]
    lines.append(json.dumps({"episode_summary": result.summary()}))
    return "\n".join(lines) + "\n"
