"""The RL learning benchmarks' own logic (benchmarks/learning/rl_learning.py, benchmarks/learning/rl_ablation.py)
without running
RL:
the harness every mode pins, the arms of the ablation and their one difference, and the window means it reports."""

import json

import pytest

from benchmarks.learning import rl_ablation, rl_learning


def _fake_runs(monkeypatch, tmp_path, rows_per_run):
    """experiments.rl.main replaced by a recorder that writes `rows_per_run` metrics for each call."""
    from experiments import rl as rl_exp

    calls = []

    def fake_main(argv, probe=0):  # probe: the copy probe's transcript count (not run here)
        calls.append(argv)
        workdir = next(a.split("=", 1)[1] for a in argv if a.startswith("--config.workdir="))
        logs = tmp_path.joinpath(workdir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        rows = rows_per_run[len(calls) - 1]
        (logs / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        evals = [{"eval/pass_rate": 0.1, "eval/effort/easy": 300.0, "eval/pass_rate/hard": 0.0},
                 {"eval/pass_rate": 0.4, "eval/effort/easy": 250.0, "eval/pass_rate/hard": 0.05}]
        return {"final_version": len(rows), "evals": evals, "sft": "trained", "flaw/lint": 3}

    monkeypatch.setattr(rl_exp, "main", fake_main)
    monkeypatch.chdir(tmp_path)
    return calls


def _rows(lint, todo, n=6):
    return [{"version": v + 1, "train_s": 1.0, "batch/pass_rate": 0.2, "batch/measure_nonzero/lint_findings": lint[v],
             "batch/measure_nonzero/n_todo_comments": todo[v]} for v in range(n)]


def test_rl_learning_pins_whole_episodes_in_every_mode(monkeypatch, tmp_path):
    calls = _fake_runs(monkeypatch, tmp_path, [[{"batch/tokens_spent": 10.0, "batch/useful_samples": 2.0}]] * 2)
    out = rl_learning.main(["--workdir", "w"])
    rl_learning.main(["--workdir", "w2", "--mode", "tree", "--config.rl.steps=3"])
    assert out["all_met"] is True and out["checks"]["easy_effort_lt_0.9x"] is True  # 250 < 0.9 · 300
    assert out["tokens_per_useful_sample"] == 5.0
    for argv in calls:
        assert all(flag in argv for flag in rl_learning.WHOLE_EPISODES), argv
    assert "--config.rl.group_mode=tree" in calls[1] and calls[1][-1] == "--config.rl.steps=3"


def test_ablation_arms_differ_only_in_the_two_weights(monkeypatch, tmp_path):
    falling, flat = [0.5, 0.5, 0.4, 0.2, 0.1, 0.0], [0.5] * 6
    calls = _fake_runs(monkeypatch, tmp_path, [_rows(falling, falling), _rows(flat, flat)])
    on, off, verdict = rl_ablation.main(["--workdir", "abl", "--versions", "6", "--window", "2", "--coef", "0.3",
                                         "--sft-from", "ckpt", "--sft-steps", "60"])
    strip = {"--config.workdir=abl/on", "--config.workdir=abl/off", "--config.reward.lint_coef=0.3",
             "--config.reward.todo_comment_coef=0.3", "--config.reward.lint_coef=0.0",
             "--config.reward.todo_comment_coef=0.0"}
    assert [a for a in calls[0] if a not in strip] == [a for a in calls[1] if a not in strip]
    assert {"--config.reward.measure_all=True", "--config.sft.init_from=ckpt", "--config.sft.steps=60",
            *rl_learning.WHOLE_EPISODES} <= set(calls[0])
    assert (on["lint_first"], on["lint_last"], off["lint_last"]) == (0.5, 0.05, 0.5)
    assert on["sft"] == {"sft": "trained", "flaw/lint": 3} and on["heldout_pass_end"] == 0.4
    assert verdict["terms_reduce_flaws"] and verdict["lint_last_on_minus_off"] == pytest.approx(-0.45)
    assert "--config.rl.eval_every=6" in calls[0]  # held-out evaluations at the start and the end
    again = rl_ablation.main(["--workdir", "abl", "--versions", "6", "--window", "2", "--reuse"])
    assert len(calls) == 2 and [line.get("reused") for line in again[:2]] == [True, True]  # read, not run again
    assert again[0]["lint_last"] == 0.05 and again[2]["terms_reduce_flaws"]


def test_ablation_names_a_missing_measurement():
    with pytest.raises(ValueError, match="no batch/measure_nonzero/lint_findings"):
        rl_ablation.window_means([{"batch/pass_rate": 0.1}], 2)


def _tree_metrics(path, evals, tokens_per_version):
    """A finished run's metrics.jsonl: a batch row per version and eval rows at the given versions."""
    path.mkdir(parents=True)
    rows = [{"step": v, "batch/tokens_spent": float(tokens_per_version), "batch/turns": 1.5, "batch/episodes": 32.0}
            for v in range(1, max(evals) + 1)]
    rows += [{"step": v, "eval/pass_rate": p, "eval/version": float(v)} for v, p in evals.items()]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_tree_learning_reads_curves_against_tokens_and_finds_where_plain_final_is_reached(tmp_path):
    from benchmarks.learning import rl_tree_learning as tl

    _tree_metrics(tmp_path / "plain" / "rl" / "logs", {0: 0.1, 10: 0.2, 20: 0.3}, 800)
    _tree_metrics(tmp_path / "uniform" / "rl" / "logs", {0: 0.1, 10: 0.35, 20: 0.4}, 600)
    plain, tree = tl.run_curve(tmp_path / "plain"), tl.run_curve(tmp_path / "uniform")
    assert [(p["version"], p["tokens"], p["env_steps"]) for p in plain] == [(0, 0.0, 0.0), (10, 8000.0, 480.0),
                                                                           (20, 16000.0, 960.0)]
    lines = {line["mode"]: line for line in tl.summarize({"plain": [plain], "uniform": [tree]})}
    assert lines["plain"]["plain_final_pass"] == 0.3 and lines["plain"]["vs_plain_tokens"] == 1.0
    # the tree curve crosses 0.3 between (0, 0.1) and (6000, 0.35): at 6000 · 0.2 / 0.25 = 4800 tokens
    assert lines["uniform"]["tokens_to_plain_final"] == pytest.approx(4800.0)
    assert lines["uniform"]["vs_plain_tokens"] == pytest.approx(0.3)
    assert tl.first_reach(tl.np.array([0.0, 10.0]), tl.np.array([0.1, 0.2]), 0.5) is None


def test_tree_learning_refuses_a_missing_start_and_an_unknown_mode(tmp_path):
    from benchmarks.learning import rl_tree_learning as tl

    with pytest.raises(SystemExit, match="not a checkpoint folder"):
        tl.main(["--init", str(tmp_path / "none"), "--workdir", str(tmp_path / "w")])
    with pytest.raises(SystemExit, match="'greedy'; expected plain or one of"):
        tl.main(["--init", str(tmp_path), "--modes", "plain,greedy"])


def test_rl_learning_family_pkg_sets_the_shapes_that_hold_its_episodes(monkeypatch, tmp_path):
    calls = _fake_runs(monkeypatch, tmp_path, [[{"batch/tokens_spent": 10.0, "batch/useful_samples": 2.0}]])
    out = rl_learning.main(["--workdir", "w", "--family", "pkg", "--config.harness.max_turns=12"])
    argv = calls[0]
    assert out["family"] == "pkg" and "--config.tasks=pkg" in argv and argv[-1] == "--config.harness.max_turns=12"
    budget = [a for a in argv if a.startswith("--config.harness.context_budget=")]
    assert budget[-1] == f"--config.harness.context_budget={rl_learning.PKG_EPISODE_BUDGET}"  # wins over 352
    assert rl_learning.PKG_EPISODE_BUDGET > 1324  # the longest whole oracle episode (k = 3, measured)
    with pytest.raises(SystemExit):
        rl_learning.main(["--family", "nope"])


def test_rl_learning_family_pkg_parses_into_a_valid_config():
    from composer2_jax.rl import orchestrator
    from experiments import rl as rl_exp

    c = rl_exp.get_config("toy")
    for flag in [*rl_learning.WHOLE_EPISODES, *rl_learning.PKG]:
        key, value = flag.removeprefix("--config.").split("=", 1)
        node = c
        *path, leaf = key.split(".")
        for part in path:
            node = node[part]
        node[leaf] = type(node[leaf])(value)
    run = orchestrator.rl_config(c)
    assert run.tasks == "pkg" and run.harness.max_turns >= 8
    orchestrator.check_shapes(run.harness, run.rollout, run.trainer.seq_len, run.tokenizer.build())


def test_rollout_engine_workload_flags_reach_the_workload():
    """benchmarks/perf/rollout_vs_static.py: --obs-min, --reply-median, --reply-max and --static-prefill-chunk shape the
    workload and the static baseline; the defaults stay the documented toy workload; bad ranges are refused."""
    from benchmarks.perf import rollout_vs_static as re_bench

    argv = ["--episodes", "64", "--turns", "8", "--obs-min", "50", "--obs-max", "2000", "--reply-median", "24",
            "--reply-max", "128"]
    cfg, wl, slots, chunk, ecfg, only = re_bench.setup(re_bench.parse_args(argv))
    assert (wl.episodes, wl.turns, wl.obs_min, wl.obs_max, wl.reply_median, wl.reply_max) == (64, 8, 50, 2000, 24, 128)
    assert (slots, chunk, only) == (8, re_bench.CPU_STATIC_PREFILL_CHUNK, "both")
    assert wl.max_context == 96 + 32 + 7 * 2000 + 8 * 128 and ecfg.max_len >= wl.max_context
    prompts, obs, budgets = wl.draw(cfg.vocab_size)
    lens = [len(o) for e in obs for o in e]
    assert len(prompts) == 64 and min(lens) >= 50 and max(lens) <= 2000
    flat = [b for e in budgets for b in e]
    assert len(flat) == 64 * 8 and max(flat) <= 128 and sorted(flat)[len(flat) // 2] in range(16, 33)
    assert re_bench.setup(re_bench.parse_args(["--static-prefill-chunk", "0"]))[3] is None  # one pass
    assert re_bench.setup(re_bench.parse_args([]))[1] == re_bench.Workload()
    for bad in (["--obs-min", "300"], ["--reply-median", "100"], ["--obs-min", "0"]):
        with pytest.raises(SystemExit):
            re_bench.setup(re_bench.parse_args(bad))
    _, wl, slots, chunk, _, only = re_bench.setup(re_bench.parse_args(["--gpu"]))
    assert (wl.episodes, wl.turns, wl.obs_min, wl.obs_max, slots, chunk, only) == (64, 8, 50, 2000, 2, None,
                                                                                   "rollout")


def test_rl_learning_runs_the_small_preset_on_its_own_family_and_targets(monkeypatch, tmp_path):
    calls = _fake_runs(monkeypatch, tmp_path, [[{"batch/tokens_spent": 10.0, "batch/useful_samples": 2.0}]])
    out = rl_learning.main(["--workdir", "w", "--preset", "small"])
    (argv,) = calls
    assert argv[1].startswith("--config=") and argv[1].endswith("experiments/rl.py:small")
    assert "--config.harness.max_summaries=0" in argv  # whole episodes, in the preset's own budget (not the toy's)
    assert not any(a.startswith(("--config.harness.context_budget=", "--config.tasks=")) for a in argv), argv
    assert out["family"] == "pkg" and set(out["checks"]) == {"pass_rate_gain_ge_0.15", "easy_effort_lt_0.9x",
                                                             "hard_pass_holds", "under_60_minutes"}
    assert out["checks"]["pass_rate_gain_ge_0.15"] is True  # 0.1 → 0.4
    with pytest.raises(SystemExit):
        rl_learning.main(["--workdir", "w", "--preset", "small", "--family", "toy"])



def test_tree_mode_spends_about_a_plain_group_of_its_own_family_unless_told(monkeypatch, tmp_path):
    """--mode tree's token budget defaults to the family's plain group (toy 600, pkg 1,650), and a flag wins."""
    runs = {"toy": [], "pkg": ["--family", "pkg"], "small": ["--preset", "small"], "flag": ["--token-budget", "900"]}
    calls = _fake_runs(monkeypatch, tmp_path, [[{"batch/tokens_spent": 10.0, "batch/useful_samples": 2.0}]] * len(runs))
    for name, args in runs.items():
        rl_learning.main(["--workdir", name, "--mode", "tree", *args])
    seen = [next(a.split("=", 1)[1] for a in argv if a.startswith("--config.rl.tree.token_budget=")) for argv in calls]
    assert seen == ["600", "1650", "1650", "900"]
