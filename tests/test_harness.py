"""The agent loop (composer2_jax/env/harness.py): tool-call execution, malformed calls, stop reasons,
self-summarisation into trainer segments, and one episode on a real sandbox."""

import time

import numpy as np
import pytest

from composer2_jax.bench.policies import ScriptedPolicy, call
from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import render_chat
from composer2_jax.env import testing as envtest
from composer2_jax.env.harness import (
    Completion,
    EpisodeOptions,
    HarnessConfig,
    generation_header,
    is_summary_request,
    run_episode,
    transcript_jsonl,
)
from composer2_jax.env.observation import Observation
from composer2_jax.env.tool_schemas import parse_arguments, tool_specs
from composer2_jax.rl.trajectory import pack_episodes

TOK = tk.ByteTokenizer()


class FakeEnv:
    """The Environment surface the harness uses, with an in-memory file dict; records every call."""

    def __init__(self):
        self.files, self.calls = {}, []

    @staticmethod
    def tools():
        return tool_specs()

    def call(self, sid, tool, args):
        self.calls.append((tool, args))
        try:
            args = parse_arguments(tool, args)
        except ValueError as e:
            return Observation.failure(e.kind, str(e))
        if tool == "write_file":
            self.files[args["path"]] = args["content"]
            return Observation(True, f"wrote {args['path']}")
        if tool == "read_file":
            if args["path"] not in self.files:
                return Observation.failure("not_found", f"no file {args['path']}")
            return Observation(True, self.files[args["path"]])
        if tool == "submit":
            return Observation(True, "submitted")
        return Observation(True, f"ran {tool}")


def episode(replies, config=HarnessConfig(max_turns=20), env=None, policy=None):
    env = env or FakeEnv()
    policy = policy or ScriptedPolicy(TOK, replies, config)
    return env, run_episode(env, "sbx-1", "Fix the bug.", policy, TOK, config, EpisodeOptions(task_id="t"))


def test_tool_calls_run_in_order_and_submit_stops():
    env, r = episode(["Writing." + call("write_file", path="a.py", content="x = 1\n") + call("read_file", path="a.py"),
                      call("submit", summary="done"), "never reached"])
    assert r.stop_reason == "submitted" and r.submitted
    assert [c[0] for c in env.calls] == ["write_file", "read_file", "submit"]
    assert env.files == {"a.py": "x = 1\n"}
    assert r.turns == 2 and len(r.tool_calls) == 3 and r.malformed == 0
    tool_msgs = [m for m in r.messages if m["role"] == "tool"]
    assert tool_msgs[1] == {"role": "tool", "name": "read_file", "content": "x = 1\n"}


def test_malformed_calls_get_error_observations_and_are_counted():
    b, e = tk.TOOL_CALL_BEGIN, tk.TOOL_CALL_END
    env, r = episode([f'{b}{{"name": "read_file", "arguments": {{"path": }}}}{e}'  # invalid JSON
                      + call("read_file", path="missing.py")  # well-formed, fails: not malformed
                      + call("no_such_tool") + call("read_file", lines=3),  # unknown tool, bad arguments
                      f'{b}{{"arguments": {{}}}}{e}', call("submit")])
    kinds = r.tool_call_errors
    assert kinds == ["bad_json", "not_found", "unknown_tool", "invalid_arguments", "unknown_tool", None]
    assert r.malformed == 4
    assert "4 malformed tool call(s)" in r.malformed_report() and "bad_json×1" in r.malformed_report()
    errors = [m["content"] for m in r.messages if m["role"] == "tool"]
    assert errors[0].startswith("error (bad_json): malformed tool call (invalid_json)")
    assert len(env.calls) == 4  # the two unparseable blocks never reached the environment


def test_reply_without_tool_call_ends_the_episode():
    _, r = episode(["I think the task is done."])
    assert r.stop_reason == "no_tool_call" and not r.submitted and r.turns == 1


def test_max_turns_and_token_budget():
    _, r = episode([call("read_file", path="x")] * 10, HarnessConfig(max_turns=3))
    assert r.stop_reason == "max_turns" and r.turns == 3
    _, r = episode([call("write_file", path="f", content="y" * 300)] * 10,
                   HarnessConfig(max_turns=50, max_total_tokens=1000))
    assert r.stop_reason == "token_budget" and r.generated_tokens >= 1000 and r.turns < 10


def test_wall_clock_timeout():
    class Slow(ScriptedPolicy):
        def generate(self, prompt_ids, max_new_tokens):
            time.sleep(0.05)
            return super().generate(prompt_ids, max_new_tokens)

    cfg = HarnessConfig(timeout_s=0.08)
    _, r = episode(None, cfg, policy=Slow(TOK, [call("read_file", path="x")] * 10, cfg))
    assert r.stop_reason == "timeout" and 1 <= r.turns <= 3


def test_context_is_exactly_what_the_renderer_produces():
    """Without summaries, the single segment equals render_chat of the transcript (canonical replies)."""
    _, r = episode([call("write_file", path="a", content="1"), call("submit", summary="s")])
    assert len(r.episode.segments) == 1
    msgs = [m if m["role"] != "assistant" else {"role": "assistant", "content": m["content"],
                                                "tool_calls": m["tool_calls"]} for m in r.messages]
    expected = render_chat(msgs, TOK, tools=tool_specs()).ids
    assert r.episode.segments[0].tokens().tolist() == expected


def test_self_summarisation_restarts_from_system_task_summary():
    cfg = HarnessConfig(max_turns=40, context_budget=9000)
    replies = [call("write_file", path=f"f{i}.txt", content="z" * 900) for i in range(12)] + [call("submit")]
    env, r = episode(replies, cfg)
    assert r.stop_reason == "submitted" and r.summaries >= 1
    assert len(r.episode.segments) == r.summaries + 1
    assert len(env.files) == 12  # the script continued across the restarts
    system_and_task = r.episode.segments[0].turns[:2]
    for seg in r.episode.segments:
        assert seg.turns[:2] == system_and_task
        assert len(seg) <= cfg.context_budget + cfg.max_new_tokens
    for seg in r.episode.segments[1:]:
        assert seg.turns[2].role == "summary_context"
    for seg in r.episode.segments[:-1]:
        assert [t.role for t in seg.turns][-2:] == ["summary_prompt", "summary"]
    assert any(m.get("summary") for m in r.messages)
    batch = pack_episodes([r.episode.with_reward(1.0)], [0.5], seq_len=cfg.context_budget + cfg.max_new_tokens)
    trained = batch.loss_mask.sum()
    assert trained == r.episode.num_trainable > 0
    assert np.all(batch.advantages[batch.loss_mask > 0] == 0.5)


def test_summary_request_is_recognisable():
    cfg = HarnessConfig()
    prompt = render_chat([{"role": "user", "content": cfg.summary_prompt}], TOK, add_generation_prompt=True).ids
    assert is_summary_request(TOK.decode(prompt), cfg)
    assert not is_summary_request(TOK.decode(generation_header(TOK)), cfg)


def test_completion_logprobs_and_versions_reach_the_episode():
    class Sampler:
        def generate(self, prompt_ids, max_new_tokens):
            ids = TOK.encode(call("submit") + tk.IM_END, allow_special=True)
            return Completion(tuple(ids), tuple(-0.5 for _ in ids), policy_version=7)

    _, r = episode(None, policy=Sampler())
    trained = [t for t in r.episode.turns if t.trainable]
    assert trained and all(t.policy_version == 7 and set(t.logprobs) == {-0.5} for t in trained)
    assert {t.role for t in trained} == {"tool_call"}


def test_bad_policy_output_is_a_clear_error():
    class Mismatch:
        def generate(self, prompt_ids, max_new_tokens):
            return Completion((1, 2, 3), (0.0,))

    with pytest.raises(ValueError, match="3 ids but 1 logprobs"):
        episode(None, policy=Mismatch())
    with pytest.raises(ValueError, match="max_turns=0"):
        HarnessConfig(max_turns=0)
    with pytest.raises(ValueError, match=r"the tool schemas \(\d+ tokens\).*context_budget=2000"):
        episode(["x"], HarnessConfig(context_budget=2000))


def test_transcript_log_names_every_call():
    _, r = episode([call("nope") + call("submit")])
    text = transcript_jsonl(r)
    assert '"error": "unknown_tool"' in text and '"stop_reason": "submitted"' in text


@pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")
def test_episode_on_a_real_sandbox(tmp_path):
    from composer2_jax.env import Environment

    repo = envtest.make_repo(str(tmp_path), {"app.py": "print('hi')\n"})
    with Environment(pool_size=1) as env:
        sid = env.create(repo)
        r = run_episode(env, sid, "Make app.py print bye.", ScriptedPolicy(TOK, [
            call("write_file", path="app.py", content="print('bye')\n")
            + call("run_terminal_cmd", command="python3 app.py"),
            call("submit", summary="prints bye")]), TOK)
        assert r.stop_reason == "submitted" and r.malformed == 0
        assert "bye" in [m for m in r.messages if m["role"] == "tool"][1]["content"]
        assert env.episode(sid)["submitted"] and env.episode(sid)["calls"] == 3
