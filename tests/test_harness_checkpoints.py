"""Episode checkpoints (env/harness.py): a branch resumed from turn k on a real sandbox starts from exactly the
parent's context, files and harness state at k, and replays the rest of the parent's episode identically."""

import pytest

from composer2_jax.bench.policies import ScriptedPolicy, call
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import testing as envtest
from composer2_jax.env.harness import (
    EpisodeOptions,
    HarnessConfig,
    fork_checkpoint,
    is_summary_request,
    resume_episode,
    run_episode,
)

TOK = tk.ByteTokenizer()
CFG = HarnessConfig(max_turns=20, context_budget=9000)
REPLIES = [
    call("todo_write", todos=[{"id": "1", "content": "write a.py", "status": "in_progress"}])
    + call("write_file", path="a.py", content="x = 1\n"),
    call("run_terminal_cmd", command="echo hi > out.txt && mkdir -p d && echo deep > d/e.txt && false"),
    call("write_file", path="big.txt", content="z" * 2500),
    call("write_file", path="big2.txt", content="y" * 2500),
    call("todo_write", todos=[{"id": "1", "content": "write a.py", "status": "done"}], merge=True)
    + call("run_terminal_cmd", command="rm d/e.txt && cat a.py out.txt"),
    call("submit", summary="done"),
]
FILES = "find . -path ./.sbx -prune -o -print0 | sort -z | xargs -0 -I{} sh -c 'echo {}; [ -f {} ] && sha256sum {}'"


def files_of(env, sid: str) -> str:
    """Every path under the workspace with the hash of every file."""
    return env.exec(sid, FILES)["stdout"]


class Recorder:
    """Wraps a policy; before each reply (not summaries) records the prompt, the sandbox's files and episode state:
    the parent's state at each turn boundary, seen independently of the checkpoints."""

    def __init__(self, policy, env, sid: str):
        self.policy, self.env, self.sid, self.states = policy, env, sid, []

    def generate(self, prompt_ids, max_new_tokens):
        if not is_summary_request(TOK.decode(prompt_ids), CFG):
            self.states.append((list(prompt_ids), files_of(self.env, self.sid), self.env.episode(self.sid)))
        return self.policy.generate(prompt_ids, max_new_tokens)


def comparable(result) -> dict:
    """Everything an episode produced except timings and the snapshot ids."""
    return {"episode": result.episode, "messages": result.messages, "stop": result.stop_reason, "turns": result.turns,
            "tool_calls": result.tool_calls, "generated": result.generated_tokens,
            "observed": result.observation_tokens, "max_context": result.max_context_tokens,
            "summaries": result.summaries, "submitted": result.submitted}


@pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")
def test_a_branch_from_turn_k_replays_the_parent_exactly(tmp_path):
    from composer2_jax.env import Environment

    repo = envtest.make_repo(str(tmp_path), {"app.py": "print('hi')\n", "pkg/m.py": "y = 2\n"})
    with Environment(pool_size=2) as env:
        sid = env.create(repo)
        rec = Recorder(ScriptedPolicy(TOK, REPLIES, CFG), env, sid)
        parent = run_episode(env, sid, "Do the steps.", rec, TOK, CFG, EpisodeOptions(task_id="t", checkpoints=True))
        parent_final = files_of(env, sid), env.episode(sid), env.changes(sid).unified_diff()
        env.close(sid)
        assert parent.stop_reason == "submitted" and parent.summaries >= 1, parent.summary()
        assert [c.turn for c in parent.checkpoints] == list(range(1, len(REPLIES)))
        assert [r.failed for r in parent.tool_calls] == [False, False, True, False, False, False, False, False]
        assert all(c.snapshot_s > 0 for c in parent.checkpoints)

        for ckpt in parent.checkpoints:
            k = ckpt.turn
            prompt, files, state = rec.states[k]
            kid = fork_checkpoint(env, ckpt)
            assert files_of(env, kid) == files, f"files differ at turn {k}"
            assert env.episode(kid) == state and env.todos(kid) == state["todos"]
            assert ckpt.context == prompt
            branch_rec = Recorder(ScriptedPolicy(TOK, REPLIES[k:], CFG), env, kid)
            branch = resume_episode(env, kid, ckpt, branch_rec, TOK, CFG, EpisodeOptions(task_id="t", checkpoints=True))
            assert branch.start_turn == k
            assert branch_rec.states[0][0] == prompt  # the branch's first reply continues the parent's context
            assert comparable(branch) == comparable(parent), f"the branch from turn {k} diverged"
            final = files_of(env, kid), env.episode(kid), env.changes(kid).unified_diff()  # changes: since the start
            assert final == parent_final
            later = {c.turn: c.state() for c in parent.checkpoints if c.turn > k}
            assert {c.turn: c.state() for c in branch.checkpoints} == later
            env.close(kid)
        first = parent.checkpoints[0]
        assert first.env_state["todos"] == [{"id": "1", "content": "write a.py", "status": "in_progress"}]
        kid = fork_checkpoint(env, first)  # a checkpoint resumes any number of times
        again = resume_episode(env, kid, first, ScriptedPolicy(TOK, REPLIES[1:], CFG), TOK, CFG,
                               EpisodeOptions(task_id="t"))
        assert comparable(again) == comparable(parent)
        env.close(kid)
        for ckpt in parent.checkpoints:
            env.delete_snapshot(ckpt.snapshot)


def test_resume_refuses_a_different_context_budget():
    class NoEnv:
        pass

    from composer2_jax.env.harness import TurnCheckpoint
    from composer2_jax.episode import SegmentBuilder

    ckpt = TurnCheckpoint(1, "snap", {}, SegmentBuilder([1], [2], [3], 100), (), (), 0, 0, 0, 0, 0.0, 0.0)
    with pytest.raises(ValueError, match="context_budget=100; config has 9000"):
        resume_episode(NoEnv(), "sid", ckpt, None, TOK, CFG)
