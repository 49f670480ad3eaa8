"""A generated family of verifiable coding tasks with a difficulty knob, sized for a tiny byte-level model.

Each task is a one-file repository `calc.py` of one-line functions `def NAME(a, b): return a OP b`. One of them
(the target) computes the wrong operator where it must add; the instruction names it. The hidden check calls the
target of the final `calc.py` on fixed inputs, and every other function to check it still behaves as before, in
an isolated child interpreter that only answers with values; the grader compares them with values it never
shows the sandbox (verify/verdict_runner.py).
The fix is always `+`, and the target is the only function using its wrong operator, so the edit names the
expression alone (`return a - b` → `return a + b`).

Difficulty knob `level` (0 … MAX_LEVEL): the file holds `level` distractor functions besides the target.
  easy (level < HINT_BELOW)   the bug is always `a - b`, quoted in the instruction: the fix text is the same on
                              every easy task (one reply: note, edit_file, submit) and needs nothing from the
                              context but the difficulty; reading the file first is wasted effort.
  hard (level ≥ HINT_BELOW)   the bug is one of WRONG_OPS (`-`, `*`, `%`), not quoted: the operator is only on
                              the named function's line of the file, so read_file first, then edit that expression.
Why so: the tiny toy model learns the tool-call format and constant text in a few hundred SFT steps, but not to
retrieve a character from its context (docs/rl.md, "The toy experiment"); easy tasks are what a policy can master,
hard tasks measure that an effort penalty does not make it skip the read it needs (their pass rate must not fall).
The oracle reads first on every hard task and on a fraction `read_prob` of easy ones, so an SFT model starts with
needless reads on easy tasks that the effort penalty can remove. As the SFT teacher it can be made imperfect
(`teacher_op`): on a fraction `error_rate` of tasks it writes a wrong operator, a well-formed fix that fails the
hidden check, and its transcripts are kept unverified, as demonstrations usually are; the SFT model inherits the
error rate and RL, which sees the check's verdict, has to rise above its teacher.

Tasks are plain data (`CodingTask`): the RL environment workers grade them in a fresh sandbox fork with the check
copied in only then (`rl/grading.py`); `write_suite` writes the same tasks as Harbor folders, so the
benchmark runner (`experiments/evaluate.py --suite DIR`) grades them through test.sh with the same check.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from composer2_jax.data.chat import format_tool_call
from composer2_jax.verify import verdict_runner

# Equal length (fixed offsets), and capitalised: their initials occur nowhere else in a context (prompts, tool calls),
# so a byte-level model finds a name by its first character alone. Sixteen, so that even level 0 (one content per
# name on easy tasks) has held-out contents.
NAMES = ("Alpha", "Bravo", "Cobra", "Delta", "Eagle", "Gamma", "Hotel", "Kappa", "Lemon", "Mango", "Omega", "Pixel",
         "Sigma", "Theta", "Viola", "Zebra")
OPS = ("+", "-", "*", "%")  # operators of distractor functions
RIGHT_OP = "+"  # what the target must compute
WRONG_OPS = ("-", "*", "%")  # what it computes instead on hard tasks
EASY_WRONG_OP = "-"  # what it computes instead on easy tasks (always: the fix text is constant)
MAX_LEVEL = 3
HINT_BELOW = 2  # levels below this quote the buggy expression in the instruction (easy)
FILE = "calc.py"
# Habits of an imperfect teacher that the hidden check cannot see, appended to the fixed line (the reward's
# auxiliary terms can: rl/rewards.py `readability` counts the lint finding — E703, a useless semicolon — and
# `todo_comments` the TODO comment). docs/rl.md, "Reward terms" (the ablation).
TEACHER_FLAWS = {"lint": ";", "todo_comment": "  # TODO: check the other operators"}
CASES = ((7, 3), (2, 5), (9, 4), (6, 6), (13, 2))  # inputs of the hidden check (b ≠ 0: % is defined)
RUNNER = "verdict_runner.py"
TEST_SH = """#!/usr/bin/env bash
# Hidden verifier (Harbor layout): the verdict runner calls calc's functions in an isolated child and judges the
# values they return; reward to $LOGS_DIR/verifier/reward.txt (Harbor: /logs/verifier/reward.txt).
python3 -I -S "${TESTS_DIR:-/tests}/verdict_runner.py"
"""


@dataclasses.dataclass(frozen=True)
class CodingTask:
    """One generated task: the repository, the instruction, and what the hidden check expects."""

    task_id: str
    level: int
    functions: tuple[tuple[str, str], ...]  # (name, op) in file order, the target with its wrong op
    target: str
    right_op: str

    @property
    def source(self) -> str:
        """The curriculum entry of the family (rl/sources.py)."""
        return "toy"

    @property
    def difficulty(self) -> str:
        """'easy' (the instruction quotes the bug) or 'hard' (it must be read from the file)."""
        return "easy" if self.level < HINT_BELOW else "hard"

    @property
    def wrong_op(self) -> str:
        return dict(self.functions)[self.target]

    @property
    def instruction(self) -> str:
        """What the agent is told."""
        if self.difficulty == "easy":
            return f"In {FILE}, {self.target} has a bug: a {self.wrong_op} b should be a {self.right_op} b."
        return f"In {FILE}, {self.target} should return a {self.right_op} b."

    def files(self) -> dict[str, str]:
        """The starting repository: {relative path: text}."""
        return {FILE: "".join(function_line(n, op) for n, op in self.functions)}

    def fixed_files(self) -> dict[str, str]:
        """The repository after the intended fix."""
        fixed = [(n, self.right_op if n == self.target else op) for n, op in self.functions]
        return {FILE: "".join(function_line(n, op) for n, op in fixed)}


def function_line(name: str, op: str) -> str:
    """One function of calc.py."""
    return f"def {name}(a, b): return a {op} b\n"


def make_task(seed: int, level: int) -> CodingTask:
    """The task of a (seed, level) pair: deterministic, so a task id names it everywhere."""
    if not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"level={level}; expected an int in [0, {MAX_LEVEL}]")
    rng = random.Random(f"calc-{seed}-{level}")
    names = rng.sample(NAMES, level + 1)
    target = names[0]
    wrong = EASY_WRONG_OP if level < HINT_BELOW else rng.choice(WRONG_OPS)
    functions = [(target, wrong)] + [(n, rng.choice([op for op in OPS if op != wrong])) for n in names[1:]]
    rng.shuffle(functions)
    return CodingTask(f"calc-{seed}-L{level}", level, tuple(functions), target, RIGHT_OP)


def split_of(task: CodingTask, heldout_frac: float = 0.2) -> str:
    """'heldout' for a fixed share of task *contents* (bug, fix and file), else 'train'; stable across runs."""
    key = f"{task.functions}|{task.target}|{task.right_op}".encode()
    return "heldout" if zlib.crc32(key) % 1000 < heldout_frac * 1000 else "train"


def task_set(n: int, seed: int, levels: Sequence[int] = tuple(range(MAX_LEVEL + 1)), split: str = "train",
             heldout_frac: float = 0.2, distinct: bool = False) -> list[CodingTask]:
    """n tasks of one content split, cycling through `levels`, drawn from seeds seed, seed+1, ….

    The split is by content, so a held-out task is never seen in training under any seed (the family is small:
    level 0 has 16 contents, one per name). `distinct` skips contents already drawn (evaluation sets).
    """
    return draw_tasks(make_task, lambda t: split_of(t, heldout_frac),
                      lambda t: (t.functions, t.target, t.right_op), n, seed, levels, split, distinct)


def draw_tasks(make: Callable, split_fn: Callable, key_fn: Callable, n: int, seed: int, levels: Sequence[int],
               split: str, distinct: bool) -> list:
    """A generated family's task set: `make(seed, level)` from seeds seed, seed+1, …, cycling through `levels`,
    keeping the tasks whose `split_fn(task)` is `split` (and, with `distinct`, whose `key_fn(task)` is new)."""
    if n < 0 or not levels or split not in ("train", "heldout"):
        raise ValueError(f"n={n}, levels={levels}, split={split!r}; expected n ≥ 0, levels, train | heldout")
    out, seen, s = [], set(), seed
    while len(out) < n:
        task = make(s, levels[len(out) % len(levels)])
        s += 1
        key = key_fn(task)
        if split_fn(task) == split and not (distinct and key in seen):
            out.append(task)
            seen.add(key)
        if s - seed > 1000 * (n + 10):
            raise ValueError(f"cannot draw {n} distinct {split} tasks at levels {levels}; the family is too small")
    return out


# ------------------------------------------------------------------------------------------------ hidden check


def case_name(function: str, a: int, b: int) -> str:
    """The answer name of one case of the hidden check."""
    return f"{function}({a}, {b})"


def check_spec(task: CodingTask, timeout_s: float = 20.0) -> dict:
    """The hidden check as the verdict runner's check.json: call every function on every case.

    The code under test only answers with the values its functions return (in a child interpreter, see
    verify/verdict_runner.py); what they should return is `expected_values`, which never enters the sandbox.
    """
    items = [{"kind": "call", "name": case_name(n, a, b), "module": "calc", "function": n, "args": [a, b]}
             for n, _ in task.functions for a, b in CASES]
    return {"version": 1, "timeout_s": timeout_s, "items": items}


def expected_values(task: CodingTask) -> dict:
    """The hidden values (expected.json): each case's sum, difference, product or remainder, computed here."""
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "%": lambda a, b: a % b}
    probes = {case_name(n, a, b): {"value": ops[task.right_op if n == task.target else op](a, b)}
              for n, op in task.functions for a, b in CASES}
    return {"version": 1, "probes": probes}


# ------------------------------------------------------------------------------------------------ the oracle


def read_call() -> str:
    """The oracle's read of calc.py (a short note, then the call)."""
    return f"Reading {FILE}." + format_tool_call("read_file", {"path": FILE})


def fix_call(task: CodingTask, new_op: str | None = None, flaws: Sequence[str] = ()) -> str:
    """The oracle's fix in one reply: a one-line note of the change, then edit_file and submit.

    The target is the only function using its operator (`make_task`), so the edit names the expression alone; the
    note comes first so that the operator is fetched (from the file, on hard tasks) at the start of the reply and the
    edit copies it from a few tokens back. On easy tasks the whole reply is the same text every time. `new_op`
    (default: the right one) is what the edit writes — a wrong one makes a well-formed fix that fails the check.
    `flaws` (names of `TEACHER_FLAWS`) are habits the hidden check cannot see, written into the new line: a lint
    finding, a TODO comment.
    """
    op = new_op or task.right_op
    old, new = f"return a {task.wrong_op} b", f"return a {op} b"
    for flaw in flaws:
        new += TEACHER_FLAWS[flaw]
    note = f"a {task.wrong_op} b -> a {op} b."
    return note + format_tool_call("edit_file", {"path": FILE, "old_string": old, "new_string": new}) + \
        format_tool_call("submit", {})


def oracle_replies(task: CodingTask, read_first: bool, new_op: str | None = None, flaws: Sequence[str] = ()
                   ) -> list[str]:
    """The oracle's assistant texts: an optional read, then the fix (always read on hard tasks) writing `new_op`
    (default: the right operator) with `flaws` (fix_call)."""
    if task.difficulty == "hard" or read_first:
        return [read_call(), fix_call(task, new_op, flaws)]
    return [fix_call(task, new_op, flaws)]


def oracle_summary(task: CodingTask) -> str:
    """What the oracle writes when its context is full (after reading the file): the line the fix must edit, so
    the fix that follows in the fresh context is grounded in the summary alone."""
    return f"I read {FILE}: {task.target} is written as return a {task.wrong_op} b. Next: fix it and submit."


def teacher_op(task: CodingTask, error_rate: float, seed: int) -> str:
    """The operator an imperfect teacher writes: the right one, or with probability `error_rate` one of the
    others (never the buggy one, so the edit still applies and the mistake is caught only by the hidden check)."""
    rng = random.Random(f"teacher-{seed}-{task.task_id}")
    if rng.random() >= error_rate:
        return task.right_op
    return rng.choice([op for op in OPS if op not in (task.right_op, task.wrong_op)])


def teacher_flaws(task: CodingTask, rates: dict[str, float], seed: int) -> tuple[str, ...]:
    """The flaws (names of `TEACHER_FLAWS`) a teacher writes into this task's fix, each with its own probability
    `rates[name]`, drawn independently and deterministically per (seed, task, flaw)."""
    unknown = sorted(set(rates) - set(TEACHER_FLAWS))
    if unknown:
        raise ValueError(f"teacher flaws {unknown}; expected names of {sorted(TEACHER_FLAWS)}")
    return tuple(name for name in TEACHER_FLAWS
                 if random.Random(f"flaw-{name}-{seed}-{task.task_id}").random() < rates.get(name, 0.0))


def oracle_reads(task: CodingTask, read_prob: float, seed: int) -> bool:
    """Whether the oracle reads first on this task: always when hard, else with probability read_prob."""
    return task.difficulty == "hard" or random.Random(f"read-{seed}-{task.task_id}").random() < read_prob


# ------------------------------------------------------------------------------------------------ Harbor folders


def write_task_folder(task: CodingTask, root: Path) -> Path:
    """The task as a Harbor folder under root (instruction, task.toml, repo, hidden tests, solution)."""
    path = Path(root) / task.task_id
    (path / "environment" / "repo").mkdir(parents=True, exist_ok=True)
    (path / "tests").mkdir(exist_ok=True)
    (path / "solution").mkdir(exist_ok=True)
    (path / "instruction.md").write_text(task.instruction + "\n")
    (path / "task.toml").write_text(
        f'version = "1.0"\n\n[metadata]\ndifficulty = "{task.difficulty}"\ncategory = "calc-L{task.level}"\n'
        f'tags = ["generated", "rl-toy"]\ngenerator = "composer2_jax.rl.tasks"\nlevel = {task.level}\n\n'
        "[verifier]\ntimeout_sec = 30.0\n\n[agent]\ntimeout_sec = 120.0\n\n"
        "[environment]\ncpus = 1\nmemory_mb = 512\nstorage_mb = 64\nallow_internet = false\n")
    for rel, text in task.files().items():
        (path / "environment" / "repo" / rel).write_text(text)
    tests = path / "tests"
    shutil.copyfile(verdict_runner.__file__, tests / RUNNER)
    (tests / verdict_runner.CHECK).write_text(json.dumps(check_spec(task), indent=1) + "\n")
    (tests / verdict_runner.EXPECTED).write_text(json.dumps(expected_values(task), indent=1) + "\n")
    (tests / "test.sh").write_text(TEST_SH)
    fixed = task.fixed_files()[FILE]
    (path / "solution" / "solve.sh").write_text(f"#!/usr/bin/env bash\ncat > {FILE} <<'EOF'\n{fixed}EOF\n")
    return path


def write_suite(tasks: Sequence[CodingTask], root: str | Path) -> Path:
    """All tasks as Harbor folders under root (a suite `experiments/evaluate.py --suite ROOT` can run)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        write_task_folder(task, root)
    (root / "suite.json").write_text(json.dumps({"generator": "composer2_jax.rl.tasks",
                                                 "tasks": [t.task_id for t in tasks]}, indent=1))
    return root
