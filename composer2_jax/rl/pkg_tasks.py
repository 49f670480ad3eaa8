"""A harder generated family for the toy RL model: multi-turn episodes with information flowing between turns.

Each task is a small package of k + 1 one-function modules `NAME.py` (`def f(a, b): return a OP b`, NAME from
`rl.tasks.NAMES`) and a visible test file `test.py`: every `f` must add, and k = 2 or 3 of them compute another
operator. The instruction names no file ("Run the tests and fix the failing functions."), so a solution has to
find its targets: run the tests (the observation names the failing modules), read each module it names, fix each,
run the tests again and submit. The oracle does exactly that in 2k + 2 tool turns (6 for k = 2, 8 for k = 3):

    1        run_terminal_cmd `python3 -B test.py`  → "FAIL Bravo", "FAIL Delta" (exit code 1)
    2, 3     read_file Bravo.py → edit_file Bravo.py (`return a - b` → `return a + b`)
    4, 5     the same for Delta.py
    6        run_terminal_cmd `python3 -B test.py` (→ "OK") and submit

Difficulty knob `level` (0 … MAX_LEVEL): k = 2 + level % 2 buggy modules; easy (level < HINT_BELOW) bugs are
always `a - b` (the fix text is constant: only the file names flow from the test run), hard ones are one of
`rl.tasks.WRONG_OPS` each, so the operator also has to be read from the module before the edit.

Grading is the toy family's: the hidden check (the verdict runner, rl/grading.py) calls every module's `f`
on fixed inputs in an isolated child interpreter and compares the values on the host with ones the sandbox never
sees; test.py and its output are not part of the verdict (an edited test.py passes nothing). Held-out tasks are a
content split (the modules, their operators and their order). The SFT teacher can be imperfect like the toy's:
on a fraction `error_rate` of tasks it writes a wrong operator into one of its fixes, sees its final test run fail,
and submits anyway (the transcript is kept unverified).

Selected in a run with `--config.tasks=pkg` (rl/sources.py); the episodes need `run_terminal_cmd` among
`env.tools` and a harness that allows 2k + 2 turns (benchmarks/learning/rl_learning.py `--family pkg` sets both).
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Sequence

from composer2_jax.data.chat import format_tool_call
from composer2_jax.rl.tasks import CASES, NAMES, OPS, RIGHT_OP, WRONG_OPS, draw_tasks

EASY_WRONG_OP = "-"
MAX_LEVEL = 3
HINT_BELOW = 2  # levels below this: every bug is `a - b` (easy)
TEST_FILE = "test.py"
TEST_COMMAND = f"python3 -B {TEST_FILE}"  # -B: no __pycache__ in the workspace's changes
FUNCTION = "f"
INSTRUCTION = "Run the tests and fix the failing functions."
TEST_PY = """import importlib
bad = [m for m in {names!r} if importlib.import_module(m).f(7, 3) != 10]
print("\\n".join("FAIL " + m for m in bad) or "OK")
raise SystemExit(1 if bad else 0)
"""


@dataclasses.dataclass(frozen=True)
class PkgTask:
    """One generated task: the package's modules (name, operator) in test order and the buggy ones."""

    task_id: str
    level: int
    modules: tuple[tuple[str, str], ...]  # (name, op) in the order test.py checks them
    right_op: str = RIGHT_OP

    @property
    def source(self) -> str:
        """The curriculum entry of the family (rl/sources.py)."""
        return "pkg"

    @property
    def difficulty(self) -> str:
        """'easy' (every bug is `a - b`) or 'hard' (each bug's operator must be read from its module)."""
        return "easy" if self.level < HINT_BELOW else "hard"

    @property
    def bugs(self) -> tuple[tuple[str, str], ...]:
        """(name, wrong op) of the buggy modules, in the order the test run prints them."""
        return tuple((n, op) for n, op in self.modules if op != self.right_op)

    @property
    def instruction(self) -> str:
        """What the agent is told: no file is named."""
        return INSTRUCTION

    def files(self) -> dict[str, str]:
        """The starting repository: {relative path: text}."""
        out = {f"{n}.py": module_text(op) for n, op in self.modules}
        out[TEST_FILE] = TEST_PY.format(names=tuple(n for n, _ in self.modules))
        return out

    def fixed_files(self) -> dict[str, str]:
        """The repository after the intended fixes."""
        return {**self.files(), **{f"{n}.py": module_text(self.right_op) for n, _ in self.bugs}}


def module_text(op: str) -> str:
    """One module of the package."""
    return f"def {FUNCTION}(a, b): return a {op} b\n"


def make_task(seed: int, level: int) -> PkgTask:
    """The task of a (seed, level) pair: deterministic, so a task id names it everywhere."""
    if not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"level={level}; expected an int in [0, {MAX_LEVEL}]")
    rng = random.Random(f"pkg-{seed}-{level}")
    k = 2 + level % 2
    names = rng.sample(NAMES, k + 1)
    ops = [EASY_WRONG_OP if level < HINT_BELOW else rng.choice(WRONG_OPS) for _ in range(k)] + [RIGHT_OP]
    modules = list(zip(names, ops))
    rng.shuffle(modules)
    return PkgTask(f"pkg-{seed}-L{level}", level, tuple(modules))


def split_of(task: PkgTask, heldout_frac: float = 0.2) -> str:
    """'heldout' for a fixed share of task contents (modules, operators, order), else 'train'; stable across runs."""
    key = f"pkg|{task.modules}|{task.right_op}".encode()
    return "heldout" if zlib.crc32(key) % 1000 < heldout_frac * 1000 else "train"


def task_set(n: int, seed: int, levels: Sequence[int] = tuple(range(MAX_LEVEL + 1)), split: str = "train",
             heldout_frac: float = 0.2, distinct: bool = True) -> list[PkgTask]:
    """n tasks of one content split, cycling through `levels`, drawn from seeds seed, seed+1, … (contents are
    plentiful — thousands per level — so they are distinct by default)."""
    return draw_tasks(make_task, lambda t: split_of(t, heldout_frac), lambda t: t.modules, n, seed, levels, split,
                      distinct)


# ------------------------------------------------------------------------------------------------ hidden check


def case_name(module: str, a: int, b: int) -> str:
    """The answer name of one case of the hidden check."""
    return f"{module}.{FUNCTION}({a}, {b})"


def check_spec(task: PkgTask, timeout_s: float = 20.0) -> dict:
    """The hidden check as the verdict runner's check.json: every module's f on every case."""
    items = [{"kind": "call", "name": case_name(n, a, b), "module": n, "function": FUNCTION, "args": [a, b]}
             for n, _ in task.modules for a, b in CASES]
    return {"version": 1, "timeout_s": timeout_s, "items": items}


def expected_values(task: PkgTask) -> dict:
    """The hidden values: every f adds."""
    return {"version": 1, "probes": {case_name(n, a, b): {"value": a + b} for n, _ in task.modules for a, b in CASES}}


# ------------------------------------------------------------------------------------------------ the oracle


def run_tests_call(note: str = "Running the tests.") -> str:
    """A note, then the test run."""
    return note + format_tool_call("run_terminal_cmd", {"command": TEST_COMMAND})


def read_call(name: str) -> str:
    """The read of one module the test run named."""
    return f"Reading {name}.py." + format_tool_call("read_file", {"path": f"{name}.py"})


def fix_call(name: str, wrong_op: str, new_op: str, then: str = "") -> str:
    """The fix of one module: a note of the change (the operator, read a few tokens back), then edit_file. `then`
    ("Running the tests again.") extends the note for the tool calls the caller appends (a reply's text comes
    before all of its calls)."""
    return f"a {wrong_op} b -> a {new_op} b." + (f" {then}" if then else "") + format_tool_call(
        "edit_file", {"path": f"{name}.py", "old_string": f"return a {wrong_op} b",
                      "new_string": f"return a {new_op} b"})


def oracle_replies(task: PkgTask, read_first: bool = True, new_ops: Sequence[str] | None = None,
                   flaws: Sequence[str] = (), retest: bool = False) -> list[str]:
    """The oracle's assistant texts (2k + 2 turns): run the tests, read and fix each failing module in the order
    the run printed them, run the tests again and submit. `new_ops` (default: the right operator for every bug) is
    what each fix writes. `read_first` and `flaws` are accepted for the toy oracle's interface and unused: this
    oracle always reads (the file names come from the test run) and writes no flaw.

    `retest`: the teacher re-runs the tests in the turn of each fix (edit_file, then the test run), so every read
    names the first `FAIL` line of the newest observation, and the last fix's turn submits after its run (2k + 1
    turns, k + 1 test runs). Picking "the failing module not yet handled" from an older run is then never needed:
    only the copy from the line just printed, which small models learn first (docs/rl.md, "Longer training forms
    the copy")."""
    del read_first, flaws
    ops = tuple(new_ops) if new_ops is not None else (task.right_op,) * len(task.bugs)
    if len(ops) != len(task.bugs):
        raise ValueError(f"new_ops={ops}: expected one operator per bug ({len(task.bugs)})")
    out = [run_tests_call()]
    for i, ((name, wrong), op) in enumerate(zip(task.bugs, ops)):
        out.append(read_call(name))
        if not retest:
            out.append(fix_call(name, wrong, op))
            continue
        rerun = fix_call(name, wrong, op, "Running the tests again.") + run_tests_call("")
        out.append(rerun if i + 1 < len(ops) else rerun + format_tool_call("submit", {}))
    if not retest:
        out.append(run_tests_call("Running the tests again.") + format_tool_call("submit", {}))
    return out


def oracle_summary(task: PkgTask) -> str:
    """What the oracle writes when its context is full: the failing modules and their operators."""
    return "Failing: " + ", ".join(f"{n}.py (a {op} b)" for n, op in task.bugs) + ". Next: fix them and submit."


def oracle_reads(task: PkgTask, read_prob: float, seed: int) -> bool:
    """This oracle always reads (the toy's interface)."""
    del task, read_prob, seed
    return True


def teacher_ops(task: PkgTask, error_rate: float, seed: int, retest: bool = False) -> tuple[str, ...]:
    """The operators an imperfect teacher writes, one per bug: the right one, except that with probability
    `error_rate` one bug (drawn) gets another operator (never its buggy one, so the edit applies and the mistake
    shows only in the final test run and the hidden check). A retesting teacher (`oracle_replies(retest=True)`) errs
    on its last fix only: an earlier wrong fix would leave that module first in the next run's `FAIL` lines, which the
    teacher's next read would then not follow."""
    rng = random.Random(f"pkg-teacher-{seed}-{task.task_id}")
    ops = [task.right_op] * len(task.bugs)
    if rng.random() < error_rate:
        i = len(ops) - 1 if retest else rng.randrange(len(ops))
        ops[i] = rng.choice([op for op in OPS if op not in (task.right_op, task.bugs[i][1])])
    return tuple(ops)


def teacher_flaws(task: PkgTask, rates: dict[str, float], seed: int) -> tuple[str, ...]:
    """No flaws in this family (the toy's interface)."""
    del task, rates, seed
    return ()
