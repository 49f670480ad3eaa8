"""Policies the runner drives through the harness (`--agent`): scripted (oracle, null, broken, tamper) and a model.

Every agent is a `harness.Policy`: it continues token contexts, so scripted agents exercise exactly the path a
model takes (render → generate → decode → parse_assistant → Environment.call). An agent spec names one:

    oracle        runs the task's (or step's) solution/solve.sh through run_terminal_cmd, then submits; image tasks
                  as Harbor's oracle does: solution/ at /solution, `/solution/solve.sh > /logs/agent/oracle.txt`
                  in the working directory with DEBIAN_FRONTEND=noninteractive and [solution] env
    null          submits at once
    broken        sends only malformed tool calls (bad JSON, unknown tool, bad arguments, unterminated), then stops
    tamper        writes a passing tests/test.sh and reward files into every place it can reach, then submits
    model:CKPT    the rollout engine (`infer.rollout_engine.RolloutEngine`) on the newest step of training
                  checkpoint folder CKPT, sampling at temperature 1 (bench/engine_policy.py)
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from composer2_jax.bench.grade import pack_dir, unpack_command, upload_commands
from composer2_jax.bench.task import Task, resolve_env
from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import end_token_id, format_tool_call, get_chat_format, rewrite_tool_calls
from composer2_jax.env.harness import (
    Completion,
    HarnessConfig,
    Policy,
    is_summary_request,
)

SCRIPTED = ("oracle", "null", "broken", "tamper")
_CHUNK = 64 * 1024


def call(name: str, **arguments: Any) -> str:
    """The text of one well-formed tool call."""
    return format_tool_call(name, arguments)


class ScriptedPolicy:
    """Replies with fixed assistant texts in order, then submits; answers a summary request with a fixed summary."""

    def __init__(self, tokenizer: tk.Tokenizer, replies: Sequence[str], config: HarnessConfig = HarnessConfig(),
                 summary: str = "Summary: I am following a fixed script; nothing else to remember."):
        self.tok, self.replies, self.config, self.summary = tokenizer, list(replies), config, summary
        self.turn = 0

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int) -> Completion:
        """The next scripted reply (closed by the chat format's end token, <|im_end|> for the project's markup), or
        the summary if the prompt asks for one. Replies are written in the project's markup; their calls are
        rewritten in the tokenizer's own tool-call tokens where it has them (data/chat.py `rewrite_tool_calls`)."""
        fmt = get_chat_format(self.tok)
        native = fmt.name != "project"
        if is_summary_request(self.tok.decode(prompt_ids), self.config, self.tok if native else None):
            text = self.summary
        elif self.turn < len(self.replies):
            text, self.turn = self.replies[self.turn], self.turn + 1
        else:
            text = "Done." + call("submit", summary="scripted agent finished")
        return Completion(self.reply_ids(text)[:max_new_tokens])

    def reply_ids(self, text: str) -> tuple[int, ...]:
        """The ids of one reply as generate emits them (before the cut at max_new_tokens): `text` in the tokenizer's
        tool-call tokens, closed by the chat format's end token."""
        fmt = get_chat_format(self.tok)
        return tuple(self.tok.encode(rewrite_tool_calls(text, fmt) + fmt.end, allow_special=True))


ORACLE_TIMEOUT_S = 600.0  # the oracle's command timeout when the task gives no agent timeout


def _image_oracle_command(task: Task, blob: str) -> str:
    """Harbor's oracle in an image: unpack at /solution (base64 + tar: an image may have no python), run solve.sh."""
    env = {"DEBIAN_FRONTEND": "noninteractive", **resolve_env(task.config.solution_env, f"{task.path}: [solution]")}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (f"rm -rf /solution && mkdir -p /solution /logs/agent && base64 -d {blob} | tar -xzf - -C /solution && "
            f"rm -f {blob} && chmod +x /solution/solve.sh && {{ {exports} /solution/solve.sh > /logs/agent/oracle.txt "
            "2>&1; rc=$?; tail -c 3000 /logs/agent/oracle.txt; exit $rc; }")


def oracle_replies(task: Task, config: HarnessConfig) -> list[str]:
    """Upload solution/ (one reply per chunk, each within the reply budget), unpack it, run solve.sh, then submit.

    Workspace tasks: at /tmp/solution, run from /workspace. Image tasks: Harbor's oracle (see the module docstring).
    """
    if task.solution_dir is None:
        raise ValueError(f"task {task.name!r} has no solution/solve.sh; the oracle agent needs one")
    blob = "/tmp/.solution.b64"
    size = max(256, min(_CHUNK, config.max_new_tokens - 512))  # base64 is ASCII: at most one token per character
    chunks = [call("run_terminal_cmd", command=c) for c in upload_commands(pack_dir(task.solution_dir), blob, size)]
    timeout = float(task.config.agent_timeout_s or ORACLE_TIMEOUT_S)
    if task.is_image:
        command = _image_oracle_command(task, blob)
    else:
        command = unpack_command(blob, "/tmp/solution") + " && cd /workspace && bash /tmp/solution/solve.sh"
    run = call("run_terminal_cmd", command=command, timeout=timeout)
    return [f"Uploading the reference solution ({i + 1}/{len(chunks)}).{c}" for i, c in enumerate(chunks)] + [
        "Running the reference solution." + run, "The solution ran." + call("submit", summary="applied solve.sh")]


def null_replies(task: Task, config: HarnessConfig) -> list[str]:
    """Submit at once."""
    return ["Submitting without changes." + call("submit", summary="no changes")]


def broken_replies(task: Task, config: HarnessConfig) -> list[str]:
    """Malformed tool calls of every kind the harness must survive, then a reply with no call."""
    b, e = tk.TOOL_CALL_BEGIN, tk.TOOL_CALL_END
    return [
        f'Reading the repo.{b}{{"name": "list_dir", "arguments": {{"path": ".",}}}}{e}',  # invalid JSON
        f'{b}{{"name": "rm_everything", "arguments": {{}}}}{e}',  # unknown tool
        f'{b}{{"name": "read_file", "arguments": {{"line": 3}}}}{e}',  # missing/unknown arguments
        f'{b}["run_terminal_cmd", "ls"]{e}',  # not an object
        f'{b}{{"name": "", "arguments": {{}}}}{e}',  # no name
        f'{b}{{"name": "submit", "arguments": "not json"}}{e}',  # arguments not an object
        f'Trying again.{b}{{"name": "submit", "arguments": {{}}',  # never closed
        "I could not call the tools.",
    ]


def tamper_replies(task: Task, config: HarnessConfig) -> list[str]:
    """Plant a passing verifier and rewards in the workspace and in /tmp, then submit without fixing anything."""
    fake = ("#!/bin/bash\nmkdir -p \"$LOGS_DIR/verifier\" /logs/verifier 2>/dev/null\n"
            "echo 1 > \"$LOGS_DIR/verifier/reward.txt\"\n")
    script = ("mkdir -p tests /tmp/tests /tmp/logs/verifier logs/verifier && "
              "for d in tests /tmp/tests; do cp tests/test.sh $d/test.sh 2>/dev/null; done; "
              "echo 1 > /tmp/logs/verifier/reward.txt; echo 1 > logs/verifier/reward.txt; echo 1 > reward.txt; "
              "echo '{\"reward\": 1}' > /tmp/logs/verifier/reward.json; chmod -R a-w tests; ls -la tests")
    return [call("write_file", path="tests/test.sh", content=fake) + call("run_terminal_cmd", command=script),
            call("submit", summary="tests pass")]


REPLIES: dict[str, Callable[[Task, HarnessConfig], list[str]]] = {
    "oracle": oracle_replies, "null": null_replies, "broken": broken_replies, "tamper": tamper_replies}


def scripted_factory(name: str, tokenizer: tk.Tokenizer, config: HarnessConfig) -> Callable[[Task], Policy]:
    """A function task -> a fresh scripted policy for one episode."""
    if name not in REPLIES:
        raise ValueError(f"unknown scripted agent {name!r}; expected one of {SCRIPTED}")
    return lambda task: ScriptedPolicy(tokenizer, REPLIES[name](task, config), config)


@dataclasses.dataclass(frozen=True)
class Agent:
    """A resolved agent spec: the per-episode policy factory and the tokenizer and limits it runs with."""

    spec: str
    factory: Callable[[Task], Policy]
    tokenizer: tk.Tokenizer
    config: HarnessConfig


SUMMARY_SLACK = 512  # tokens kept free past the budget for the summary request (prompt and headers)


def fit_context(config: HarnessConfig, max_context: int) -> HarnessConfig:
    """The config with context_budget lowered so that a full context plus one reply, or plus the summary request and
    the summary, fits the model's context (the engine policy also clamps a reply to the room left)."""
    reserve = max(config.max_new_tokens, config.summary_tokens) + SUMMARY_SLACK
    budget = min(config.context_budget, max_context - reserve)
    if budget <= 0:
        raise ValueError(f"max_new_tokens={config.max_new_tokens} / summary_tokens={config.summary_tokens} do not fit "
                         f"the model's context of {max_context} tokens; lower --max-new-tokens")
    return dataclasses.replace(config, context_budget=budget)


def make_agent(spec: str, config: HarnessConfig = HarnessConfig(), tokenizer: tk.Tokenizer | None = None) -> Agent:
    """Resolve an agent spec (see the module docstring); a model's tokenizer defaults to its checkpoint's."""
    if spec in SCRIPTED:
        tok = tokenizer or tk.ByteTokenizer()
        return Agent(spec, scripted_factory(spec, tok, config), tok, config)
    if not spec.startswith("model:") or len(spec) == len("model:"):
        raise ValueError(f"agent spec {spec!r}; expected one of {', '.join(SCRIPTED)} or model:CHECKPOINT")
    from composer2_jax.bench.engine_policy import (
        EnginePolicy,
        checkpoint_tokenizer,
        load_checkpoint,
    )

    engine, saved = load_checkpoint(spec[len("model:"):])
    tok = tokenizer or checkpoint_tokenizer(saved)
    if tok.vocab_size > engine.cfg.vocab_size:
        raise ValueError(f"tokenizer has {tok.vocab_size} ids but the model's vocab_size is {engine.cfg.vocab_size}")
    limit = tok.vocab_size if tok.vocab_size < engine.cfg.vocab_size else 0  # only ids the tokenizer can decode
    policy = EnginePolicy(engine, end_token_id(tok), vocab_limit=limit)
    return Agent(spec, lambda task: policy, tok, fit_context(config, policy.max_context))


def describe(spec: str) -> str:
    """A filesystem-safe name of an agent spec (for run directories)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.replace("model:", "model-"))[:80]

