"""Branching rollouts (rl/branching.py): tree groups grown from turn checkpoints train every sampled token exactly
once with the leaf's path as context, the node-choice rules pick what they promise, and a tree group runs on real
sandboxes through the environment worker and packs in the trainer beside plain groups."""

import copy
import dataclasses
import itertools
import time

import numpy as np
import pytest

from composer2_jax.bench.policies import call
from composer2_jax.data import tokenizer as tk
from composer2_jax.env.harness import (
    Completion,
    EpisodeOptions,
    HarnessConfig,
    fork_checkpoint,
    resume_episode,
    run_episode,
)
from composer2_jax.env.observation import Observation
from composer2_jax.env.tool_schemas import parse_arguments
from composer2_jax.rl.branching import (
    NODE_CHOICE,
    ROOT,
    Branch,
    TreeConfig,
    assemble,
    frontier,
    grow_tree,
    next_action_entropy,
)
from composer2_jax.rl.trajectory import pack_segments
from tests.markers import needs_sandbox
from tests.tolerances import FP32_FN

TOK = tk.ByteTokenizer()
CFG = HarnessConfig(max_turns=6, context_budget=20_000, system_prompt="Do it.")


class SnapEnv:
    """An in-memory Environment with snapshot / fork / episode state: files per sandbox, exit codes per command."""

    def __init__(self):
        self.files, self.state, self.snaps, self.ids = {}, {}, {}, itertools.count()

    @staticmethod
    def tools():
        return []

    def create(self):
        sid = f"s{next(self.ids)}"
        self.files[sid], self.state[sid] = {}, {"calls": 0}
        return sid

    def call(self, sid, tool, args):
        self.state[sid]["calls"] += 1
        args = parse_arguments(tool, args)
        if tool == "write_file":
            self.files[sid][args["path"]] = args["content"]
            return Observation(True, "wrote")
        if tool == "run_terminal_cmd":
            code = 1 if args["command"] == "false" else 0
            return Observation(True, f"exit code {code}", {"exit_code": code})
        return Observation(True, "submitted")

    def snapshot(self, sid):
        snap = f"p{next(self.ids)}"
        self.snaps[snap] = dict(self.files[sid])
        return snap

    def fork(self, snap, keep_origin=False):
        sid = self.create()
        self.files[sid] = dict(self.snaps[snap])
        return sid

    def episode(self, sid):
        return copy.deepcopy(self.state[sid])

    def set_episode(self, sid, state):
        self.state[sid] = copy.deepcopy(state)

    def close(self, sid):
        self.files.pop(sid)


class CoinPolicy:
    """Writes a file and runs 'true' or (with probability p) 'false' (a failure signal), submitting at its third
    reply; each reply's log μ is its probability spread evenly over its tokens."""

    def __init__(self, p_fail: float, seed: int):
        self.p, self.rng = p_fail, np.random.default_rng(seed)

    def generate(self, prompt_ids, max_new_tokens):
        replies = TOK.decode(prompt_ids).count(f"{tk.IM_ASSISTANT}assistant") - 1
        if replies >= 2:
            text, logp = call("submit"), 0.0
        else:
            fail = self.rng.random() < self.p
            text = call("write_file", path=f"f{replies}.txt", content=str(self.rng.integers(1000))) + call(
                "run_terminal_cmd", command="false" if fail else "true")
            logp = np.log(self.p if fail else 1 - self.p)
        ids = TOK.encode(text + tk.IM_END, allow_special=True)
        return Completion(tuple(ids), (logp / len(ids),) * len(ids))


def reward_of(result) -> float:
    """1 when no command of the episode failed."""
    return float(not any(r.failed for r in result.tool_calls))


def runner(env, policy):
    def run(ckpt):
        if ckpt is None:
            sid = env.create()
            r = run_episode(env, sid, "Do the task.", policy, TOK, CFG, EpisodeOptions(checkpoints=True))
        else:
            sid = fork_checkpoint(env, ckpt)
            r = resume_episode(env, sid, ckpt, policy, TOK, CFG, EpisodeOptions(checkpoints=True))
        return Branch(r, reward_of(r), payload=dict(env.files[sid]))
    return run


@pytest.mark.parametrize("rule", sorted(NODE_CHOICE))
def test_a_grown_tree_trains_every_sampled_token_once_on_its_leaf_path(rule):
    env = SnapEnv()
    group = grow_tree(runner(env, CoinPolicy(0.4, seed=1)), TreeConfig(initial=2, branches=2, token_budget=900,
                                                                        node_choice=rule),
                      np.random.default_rng(0))
    tree = group.tree
    assert len(tree.leaves) == len(group.branches) >= 4 and group.generated_tokens >= 900
    assert group.generated_tokens == sum(
        b.result.generated_tokens - (0 if b.start == ROOT else group.checkpoints[b.start].generated_tokens)
        for b in group.branches)
    items = tree.training_items()
    for (seg, adv), leaf, br in zip(items, tree.leaves, group.branches):
        episode_seg = br.result.episode.segments[0]
        assert (seg.tokens() == episode_seg.tokens()).all()  # the leaf's path is its whole episode
        assert (seg.behav_logprobs()[seg.loss_mask() > 0] == episode_seg.behav_logprobs()[seg.loss_mask() > 0]).all()
        if br.start != ROOT:  # a branch starts with exactly its start node's context
            ctx = group.checkpoints[br.start].context
            assert list(episode_seg.tokens()[:len(ctx)]) == ctx
    sampled = sum(len(t.tokens) for n in tree.nodes.values() for t in n.turns if t.trainable)
    assert sum(seg.loss_mask().sum() for seg, _ in items) == sampled  # shared prefixes trained once
    new = sum(b.result.generated_tokens for b in group.branches if b.start == ROOT) + sum(
        b.result.generated_tokens - group.checkpoints[b.start].generated_tokens for b in group.branches
        if b.start != ROOT)
    assert sampled == new == group.generated_tokens  # every generated token is trained, none twice
    batch = pack_segments(items, seq_len=4096)
    assert batch.loss_mask.sum() == sampled


def scripted(plan):
    """A policy that follows a list of ('ok' | 'fail' | 'submit', log μ per token) replies in order."""
    class Plan:
        def __init__(self):
            self.steps = iter(plan)

        def generate(self, prompt_ids, max_new_tokens):
            kind, lp = next(self.steps)
            text = call("submit") if kind == "submit" else call("run_terminal_cmd",
                                                                 command="false" if kind == "fail" else "true")
            ids = TOK.encode(text + tk.IM_END, allow_special=True)
            return Completion(tuple(ids), (lp,) * len(ids))
    return Plan()


def test_node_choice_rules_pick_failures_entropy_and_everything():
    env = SnapEnv()
    a = runner(env, scripted([("ok", -0.1), ("fail", -2.0), ("submit", -0.1)]))(None)  # fails at turn 2
    b = runner(env, scripted([("fail", -0.5), ("ok", -0.1), ("submit", -0.1)]))(None)  # fails at turn 1
    c = runner(env, scripted([("ok", -0.1), ("ok", -0.1), ("submit", -0.1)]))(None)  # never fails
    branches = [Branch(a.result, a.reward), Branch(b.result, b.reward), Branch(c.result, c.reward)]
    tree, ckpts, leaf_branch = assemble(branches)
    assert set(ckpts) == {(0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2)}
    f = frontier(tree, ckpts, branches, leaf_branch, visits={})
    assert f.first_failure == {(0, "end"): (0, 1), (1, "end"): ROOT, (2, "end"): None}
    rng = np.random.default_rng(0)
    picks = {NODE_CHOICE["first_failure"](f, rng) for _ in range(50)}
    assert picks == {(0, 1), ROOT}
    np.testing.assert_allclose(next_action_entropy(f, (0, 1)), 2.0, **FP32_FN)
    n_ok, n_fail = (len(TOK.encode(call("run_terminal_cmd", command=c) + tk.IM_END, allow_special=True))
                    for c in ("true", "false"))
    mean = (0.1 * 2 * n_ok + 0.5 * n_fail) / (2 * n_ok + n_fail)  # per token over the three first replies
    np.testing.assert_allclose(next_action_entropy(f, ROOT), mean, **FP32_FN)
    assert NODE_CHOICE["entropy"](f, rng) == (0, 1)
    f2 = frontier(tree, ckpts, branches, leaf_branch, visits={(0, 1): 1})
    assert NODE_CHOICE["entropy"](f2, rng) == ROOT  # the next highest among boundaries not yet branched from
    assert {NODE_CHOICE["uniform"](f, rng) for _ in range(400)} == set(f.boundaries) == {ROOT, *ckpts}
    ok = [Branch(c.result, c.reward)] * 2
    tree2, ckpts2, lb2 = assemble(ok)
    f3 = frontier(tree2, ckpts2, ok, lb2, {})
    assert {NODE_CHOICE["first_failure"](f3, rng) for _ in range(200)} == set(f3.boundaries)  # none failed: uniform


def test_bad_trees_and_configs_are_refused():
    env = SnapEnv()
    a = runner(env, CoinPolicy(0.0, 0))(None)
    with pytest.raises(ValueError, match=r"starts at \(7, 1\), which is no checkpoint"):
        assemble([a, Branch(a.result, 0.0, start=(7, 1))])
    with pytest.raises(ValueError, match="node_choice='best'; expected one of"):
        TreeConfig(node_choice="best")
    with pytest.raises(ValueError, match="token_budget=0"):
        TreeConfig(token_budget=0)
    from composer2_jax.rl.run_config import RLConfig

    with pytest.raises(ValueError, match="group_mode='forest'; expected one of"):
        RLConfig(group_mode="forest")
    assert RLConfig(group_mode="tree", backend="ray").group_mode == "tree"  # branches go to their snapshot's actor
    summarised = dataclasses.replace(a.result, summaries=1)
    with pytest.raises(ValueError, match="branch 0 summarised its context 1 time"):
        assemble([Branch(summarised, 0.0)])
    from composer2_jax.rl.run_config import RLExperimentConfig

    with pytest.raises(ValueError, match=r"group_mode='tree' with harness.max_summaries=8: .* expected "
                                         r"harness.max_summaries=0"):
        RLExperimentConfig(rl=RLConfig(group_mode="tree"), harness=HarnessConfig(max_summaries=8))
    RLExperimentConfig(rl=RLConfig(group_mode="tree"), harness=HarnessConfig(max_new_tokens=64, summary_tokens=64,
                                                                             max_summaries=0))


def test_a_tree_episode_that_fills_its_context_ends_instead_of_summarising():
    """With max_summaries=0 (what tree groups require) an episode that reaches its context budget ends with stop
    reason summary_limit: one segment, a valid tree path."""
    env = SnapEnv()
    cfg = dataclasses.replace(CFG, context_budget=200, max_summaries=0, summary_prompt="Summarise.")
    sid = env.create()
    r = run_episode(env, sid, "Do the task.", CoinPolicy(0.0, 0), TOK, cfg, EpisodeOptions(checkpoints=True))
    assert r.stop_reason == "summary_limit" and r.summaries == 0 and len(r.episode.segments) == 1
    tree, _, _ = assemble([Branch(r, 0.0)])
    assert len(tree.leaves) == 1


def useful_group(tree, successes):
    from composer2_jax.rl.records import EpisodeRecord, GroupRecord

    eps = [EpisodeRecord(None, [], "t", "easy", s, s, 0.0, {}, "submitted", 1, 0, 0, 1, 0.0, 0.0, 0)
           for s in successes]
    return GroupRecord(0, "t", 0, eps, tree=tree)


def test_useful_samples_count_leaves_that_train_a_pass_fail_signal():
    from composer2_jax.episode import Turn
    from composer2_jax.rl.records import useful_samples
    from composer2_jax.rl.tree import GroupTree, TreeNode

    def turn():
        return (Turn("message", (1, 2), True, (-0.1, -0.1), 0),)

    assert useful_samples(useful_group(None, [1.0, 0.0, 0.0, 0.0])) == 4  # plain: mixed group, all useful
    assert useful_samples(useful_group(None, [1.0, 1.0, 1.0])) == 0  # plain: no signal
    # root ─ a ─┬─ a1 (pass)       V(root) = 2/3, V(a) = 1/2: a→a1 = +1/2 and a→a2 = −1/2 (and root→a, owned by
    #      │    └─ a2 (fail)       a1) carry a signal: a1 and a2 are useful;
    #      └ b (pass)              root→b = 1 − 2/3 is b's own edge: useful
    nodes = [TreeNode("root", None, (Turn("user", (0,), False),)), TreeNode("a", "root", turn()),
             TreeNode("a1", "a", turn(), 1.0), TreeNode("a2", "a", turn(), 0.0), TreeNode("b", "root", turn(), 1.0)]
    tree = GroupTree(nodes)
    assert tree.leaves == ["a1", "a2", "b"]
    assert useful_samples(useful_group(tree, [1.0, 0.0, 1.0])) == 3
    # all pass: nothing is useful, whatever the reward's length penalty does
    assert useful_samples(useful_group(tree, [1.0, 1.0, 1.0])) == 0
    # a1 and a2 both fail, b passes: a is worse than root, owned by a1 (the first leaf below it); a1→, a2→ carry 0
    assert useful_samples(useful_group(tree, [0.0, 0.0, 1.0])) == 2
    with pytest.raises(ValueError, match="2 episodes for 3 leaves"):
        useful_samples(useful_group(tree, [1.0, 0.0]))


def test_concurrent_first_episodes_of_a_task_import_its_repository_once(tmp_path):
    """EnvWorker.snapshot: episodes of a new task that start together write and import its folder once, and the
    import sees the whole file (no thread truncates it under another's import)."""
    import threading
    import time

    from composer2_jax.rl import tasks
    from composer2_jax.rl.rewards import RewardConfig
    from composer2_jax.rl.services.env_worker import EnvWorker

    task = tasks.task_set(1, 0)[0]
    expected = task.files()

    class ImportEnv:
        def __init__(self):
            self.imports, self.seen, self.lock = 0, [], threading.Lock()

        def import_repo(self, repo):
            time.sleep(0.05)  # a slow import: the window in which another writer would truncate the files
            seen = {rel: (tmp_path / "repos" / task.task_id / rel).read_text() for rel in expected}
            with self.lock:
                self.imports += 1
                self.seen.append(seen)
                return f"snap{self.imports}"

        def delete_snapshot(self, snap):
            raise AssertionError(f"nothing to delete: {snap}")

    env = ImportEnv()
    worker = EnvWorker(env, TOK, CFG, RewardConfig(), ("read_file",), repo_root=tmp_path / "repos")
    barrier, out = threading.Barrier(8), []

    def first_episode():
        barrier.wait()
        out.append(worker.snapshot(task))

    threads = [threading.Thread(target=first_episode) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == ["snap1"] * 8 and env.imports == 1 and env.seen == [expected]


# ------------------------------------------------------------------------------------------------ real sandboxes



@needs_sandbox
def test_a_bug_in_the_tree_code_stops_the_run_naming_it(tmp_path, monkeypatch):
    """An exception of the tree code itself (not a worker's failure, which drops the group) stops the run with it,
    where it was once logged and the group dropped, so that every tree group could fail the same way unseen."""
    from composer2_jax.env import Environment, SandboxLimits
    from composer2_jax.rl import tasks
    from composer2_jax.rl.curriculum import TaskCurriculum
    from composer2_jax.rl.records import Counters
    from composer2_jax.rl.rewards import RewardConfig
    from composer2_jax.rl.run_config import LoopConfig, RLConfig
    from composer2_jax.rl.services import local
    from composer2_jax.rl.services.env_worker import EnvWorker
    from composer2_jax.rl.services.testing import CountingTrainer, ScriptedRollout
    from composer2_jax.rl.services.weights import WeightStore

    grown = []

    def grow_tree_with_a_bug(run, cfg, rng, pool):
        grown.append(1)
        if len(grown) == 3:
            raise KeyError("node 7")
        return grow_tree(run, cfg, rng, pool)

    monkeypatch.setattr(local, "grow_tree", grow_tree_with_a_bug)
    harness = HarnessConfig(max_turns=4, max_new_tokens=192, max_total_tokens=1024, context_budget=2048,
                            system_prompt="Fix the bug.")
    with Environment(pool_size=4, limits=SandboxLimits(timeout_s=30)) as env:
        store = WeightStore()
        worker = EnvWorker(env, TOK, harness, RewardConfig(), ("read_file", "edit_file", "submit"),
                           schemas_in_prompt=False, repo_root=tmp_path)
        rl = RLConfig(eta=1, steps=4, groups_per_batch=2, group_mode="tree",
                      tree=TreeConfig(initial=2, branches=2, token_budget=600),
                      loop=LoopConfig(episode_threads=4, max_retries=1, take_timeout_s=120))
        orch = local.LocalOrchestrator(CountingTrainer(eta=1), ScriptedRollout(store, p_correct=0.5, seed=3), worker,
                                       TaskCurriculum(tasks.task_set(40, 0)), rl, store, Counters())
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match=r"the tree job of group \d+ \(\S+\) raised KeyError: 'node 7'"):
            orch.run()
        assert time.monotonic() - t0 < 60  # not the take timeout


@needs_sandbox
@pytest.mark.parametrize("rule", ["first_failure", "entropy"])
def test_tree_groups_run_through_the_embedded_loop_and_pack(tmp_path, rule):
    from composer2_jax.env import Environment, SandboxLimits
    from composer2_jax.rl import tasks
    from composer2_jax.rl.curriculum import TaskCurriculum
    from composer2_jax.rl.records import Counters
    from composer2_jax.rl.rewards import RewardConfig
    from composer2_jax.rl.run_config import LoopConfig, RLConfig
    from composer2_jax.rl.services.env_worker import EnvWorker
    from composer2_jax.rl.services.local import LocalOrchestrator
    from composer2_jax.rl.services.testing import CountingTrainer, ScriptedRollout
    from composer2_jax.rl.services.trainer import training_items
    from composer2_jax.rl.services.weights import WeightStore

    harness = HarnessConfig(max_turns=4, max_new_tokens=192, max_total_tokens=1024, context_budget=2048,
                            system_prompt="Fix the bug.")
    hard = [t for t in tasks.task_set(60, 0) if "should return" in t.instruction][:8]  # read first, then fix
    with Environment(pool_size=4, limits=SandboxLimits(timeout_s=30)) as env:
        store, counters = WeightStore(), Counters()
        worker = EnvWorker(env, TOK, harness, RewardConfig(), ("read_file", "edit_file", "submit"),
                           schemas_in_prompt=False, repo_root=tmp_path)
        rl = RLConfig(eta=1, steps=2, groups_per_batch=2, group_mode="tree",
                      tree=TreeConfig(initial=2, branches=2, token_budget=600, node_choice=rule),
                      loop=LoopConfig(episode_threads=4, max_retries=1, take_timeout_s=120))
        trainer = CountingTrainer(eta=1)
        orch = LocalOrchestrator(trainer, ScriptedRollout(store, p_correct=0.5, seed=3), worker, TaskCurriculum(hard),
                                 rl, store, counters)
        orch.run()
        assert trainer.version == 2 and trainer.violations == 0
        groups = [g for batch in trainer.consumed for g in batch]
        assert all(g.tree is not None and len(g.episodes) == len(g.tree.leaves) >= 4 for g in groups)
        assert counters.get("tree_branches") >= 2 * len(groups)
        for g in groups:
            for leaf, ep in zip(g.tree.leaves, g.episodes):  # a leaf's path is its episode, graded on its own
                path = [t for n in g.tree.path(leaf) for t in g.tree.nodes[n].turns]
                assert [tok for t in path for tok in t.tokens] == list(ep.episode.segments[0].tokens())
                assert g.tree.nodes[leaf].reward == ep.reward
        items, records = training_items(groups, seq_len=2048)
        assert len(items) == sum(len(g.tree.leaves) for g in groups) and records == [None] * len(items)
        batch = pack_segments(items, seq_len=2048)
        sampled = sum(len(t.tokens) for g in groups for n in g.tree.nodes.values() for t in n.turns if t.trainable)
        assert batch.loss_mask.sum() == sampled  # shared prefixes trained once
        assert env.sandboxes() == [] and set(env.snapshots()) == set(worker._snaps.values())  # checkpoints released
