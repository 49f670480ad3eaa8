"""Task sources the RL loop draws from, and the mixed curriculum over them (one string: `--config.tasks`).

    toy                 the generated calc family (rl/tasks.py): fast, the CI family
    pkg                 the generated multi-module family (rl/pkg_tasks.py): 6–8-turn episodes (run the tests,
                        read and fix each failing module, re-run); needs run_terminal_cmd in env.tools
    suite:VERSION|DIR   Harbor-format task folders (benchmarks/tasks/VERSION or any folder of task folders)
    generated:DIR       feature-deletion tasks in DIR, generated there on first use: from the standard library
                        (bench/authoring/generate_stdlib.py), or from any pure-Python package
                        (`sources.generated_packages`: bench/authoring/generate_package.py)

A curriculum is comma-separated sources with weights, `toy@2,suite:v0@1,generated:runs/gen@1` (weight 1 when
omitted): each group's source is drawn with probability ∝ its weight, then a task of that source (each source's
tasks cycle in their own seeded order). Every source has a train and a held-out split:
- suites and generated folders split by task: a fixed share (`SourcesConfig.heldout_frac`) of task names, chosen
  by a hash of the name, is held out; a whole suite version named in `heldout_versions` is held out entirely
  (evaluation only, never trained on);
- the toy and pkg families split by content (rl/tasks.py, rl/pkg_tasks.py `split_of`).
Groups, staleness, grading and evaluation are the same for every source: a task of any source is an `RLTask`
(id, instruction, difficulty, source, starting repository) that the env worker grades through its source's
verdict (rl/grading.py `grade_episode`). Harbor folders give every task the benchmark runner can run:
workspace tasks, image tasks (environment/Dockerfile or docker_image), multi-container tasks (docker-compose.yaml)
and multi-step tasks, one RL task per step (step k starts where the reference solutions of steps 1..k-1 leave the
machine: rl/image_tasks.py); image tasks run in the evaluator's sandboxes (bench/runner.py). Tasks that are not
runnable here, and steps whose earlier steps have no solution/solve.sh, are skipped and counted
(`SourceTasks.skipped`).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from composer2_jax.bench.task import Step, Task, load_suite
from composer2_jax.rl import pkg_tasks
from composer2_jax.rl import tasks as toy

KINDS = ("toy", "pkg", "suite", "generated")
FAMILIES = ("toy", "pkg")  # generated in memory, no argument, split by content; the rest are Harbor folders
HARBOR_KINDS = ("suite", "generated")  # Harbor folders: the deploy harness's tools (rl/run_config.py EnvConfig)
SPLITS = ("train", "heldout")


@runtime_checkable
class RLTask(Protocol):
    """What the RL loop needs of a task, whatever its source."""

    task_id: str  # unique across sources
    instruction: str  # what the agent is told
    difficulty: str  # easy | medium | hard (logged per difficulty)
    source: str  # the curriculum entry it came from (logged per source)


@dataclasses.dataclass(frozen=True)
class HarborTask:
    """A task of a Harbor folder (workspace, image or multi-container), or one step of a multi-step task, as an RL
    task; graded by its own verifier."""

    task: Task
    source: str  # e.g. "suite:v0"
    step: int | None = None  # a multi-step task's step (index into task.steps); None: a single-step task

    @property
    def task_id(self) -> str:
        suffix = f"/{self.task.steps[self.step].config.name}" if self.step is not None else ""
        return f"{self.source}/{self.task.name}{suffix}"

    @property
    def instruction(self) -> str:
        return self.run_step().instruction

    def run_step(self) -> Step:
        """The step the agent does: the task's one step, or steps[step]."""
        return self.task.run_steps()[self.step or 0]

    @property
    def difficulty(self) -> str:
        return self.task.difficulty

    def repo_dir(self, cache_dir: str | Path | None = None) -> Path:
        """The starting repository (materialised once in cache_dir when archived or generated)."""
        return self.task.repo_dir(cache_dir)


@dataclasses.dataclass(frozen=True)
class SourceSpec:
    """One entry of a curriculum string."""

    kind: str  # one of KINDS
    arg: str  # suite: version or folder; generated: folder; toy: ""
    weight: float

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind


def parse_mix(mix: str) -> tuple[SourceSpec, ...]:
    """`SOURCE[@WEIGHT],…` → specs; a clear error naming the entry for an unknown kind, a missing argument or a
    weight that is not a positive number."""
    specs = []
    for entry in (e.strip() for e in mix.split(",")):
        if not entry:
            continue
        source, _, weight = entry.partition("@")
        kind, _, arg = source.partition(":")
        if kind not in KINDS:
            raise ValueError(f"task source {entry!r}: unknown kind {kind!r}; expected one of {KINDS} "
                             f"(e.g. toy@2,suite:v0@1,generated:runs/gen@1)")
        if (kind in FAMILIES) == bool(arg):
            why = "takes no argument" if arg else "needs :FOLDER"
            raise ValueError(f"task source {entry!r}: {kind} {why}")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            w = -1.0
        if not w > 0:
            raise ValueError(f"task source {entry!r}: weight {weight!r}; expected a positive number")
        specs.append(SourceSpec(kind, arg, w))
    if not specs:
        raise ValueError(f"tasks={mix!r} names no source; expected e.g. 'toy' or 'toy@2,suite:v0@1'")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"tasks={mix!r} names a source twice: {names}")
    return tuple(specs)


def split_of_name(name: str, heldout_frac: float) -> str:
    """'heldout' for a fixed share of task names (a hash, stable across runs and machines), else 'train'."""
    return "heldout" if zlib.crc32(name.encode()) % 1000 < heldout_frac * 1000 else "train"


@dataclasses.dataclass(frozen=True)
class SourcesConfig:
    """How the task sources of `tasks` (this module) split and fill; the toy family's sizes stay in `rl`."""

    heldout_frac: float = 0.2  # share of a suite's or generated folder's task names held out of training
    heldout_versions: tuple[str, ...] = ()  # suite versions (or folders) held out whole: evaluated, never trained
    eval_tasks: int = 16  # held-out tasks per Harbor source per evaluation (the toy family uses rl.eval_tasks)
    generated_count: int = 200  # tasks a generated:DIR source writes into an empty DIR
    generated_seed: int = 0  # order in which the generator tries candidates
    generated_modules: tuple[str, ...] = ()  # modules to delete functions from (() = generate_stdlib.MODULES)
    generated_dirs: tuple[str, ...] = ()  # folders holding M.py and test/test_M.py (() = the stdlib)
    generated_per_module: int = 2  # most tasks per module (raise it, with more modules, for hundreds of tasks)
    # pure-Python packages to delete functions from instead of the stdlib (bench/authoring/generate_package.py):
    # importable names, package folders, wheels or sdists; () = the stdlib modules above
    generated_packages: tuple[str, ...] = ()

    def __post_init__(self):
        if (not 0 <= self.heldout_frac < 1 or self.eval_tasks < 1 or self.generated_count < 1
                or self.generated_per_module < 1):
            raise ValueError(f"sources.heldout_frac={self.heldout_frac}, eval_tasks={self.eval_tasks}, "
                             f"generated_count={self.generated_count}, generated_per_module="
                             f"{self.generated_per_module}; expected [0, 1), >= 1, >= 1, >= 1")


@dataclasses.dataclass(frozen=True)
class SourceTasks:
    """The tasks of one source in one split, and what was skipped (name → why)."""

    spec: SourceSpec
    tasks: tuple
    skipped: dict[str, str]


def harbor_tasks(spec: SourceSpec, folder: str | Path, split: str, heldout_frac: float,
                 heldout_versions: Sequence[str] = ()) -> SourceTasks:
    """The runnable tasks of a Harbor folder in one split (a multi-step task: one per reachable step; a task's
    steps stay in one split)."""
    suite = load_suite(folder)
    skipped = {u.name: u.reason for u in suite.unsupported}
    whole_heldout = suite.name in heldout_versions or spec.arg in heldout_versions
    out = []
    for t in suite.tasks:
        in_split = "heldout" if whole_heldout else split_of_name(t.name, heldout_frac)
        if in_split != split:
            continue
        if not t.steps:
            out.append(HarborTask(t, spec.name))
            continue
        for i, step in enumerate(t.steps):
            missing = [s.config.name for s in t.steps[:i] if s.solution_dir is None]
            if missing:
                skipped[f"{t.name}/{step.config.name}"] = (f"steps {missing} before it have no solution/solve.sh to "
                                                           "reach its start")
                continue
            out.append(HarborTask(t, spec.name, i))
    return SourceTasks(spec, tuple(out), skipped)


def generated_tasks(spec: SourceSpec, split: str, sc: SourcesConfig = SourcesConfig()) -> SourceTasks:
    """The feature-deletion tasks in the spec's folder (generated there first when it holds none, with the
    `generated_*` settings of `sc`): from `sc.generated_packages` (any pure-Python package: an importable name, a
    folder, a wheel or an sdist; bench/authoring/generate_package.py) when given, else from standard-library
    `sc.generated_modules` and their Lib/test tests (bench/authoring/generate_stdlib.py); split by
    `sc.heldout_frac`."""
    folder = Path(spec.arg)
    if not folder.is_dir() or not any((p / "instruction.md").is_file() for p in folder.iterdir()):
        folder.mkdir(parents=True, exist_ok=True)
        count, seed, per_module, packages = (sc.generated_count, sc.generated_seed, sc.generated_per_module,
                                             sc.generated_packages)
        if packages:
            from composer2_jax.bench.authoring import generate_package

            written = generate_package.generate_tasks(folder, count, tuple(packages), seed, per_module=per_module)
            what = f"packages {list(packages)}"
        else:
            from composer2_jax.bench.authoring import generate_stdlib as generate

            modules, dirs = tuple(sc.generated_modules) or generate.MODULES, list(sc.generated_dirs) or None
            written = generate.generate(folder, count, seed, modules, dirs, per_module=per_module)
            what = f"modules {modules}, folders {dirs or 'the stdlib'}"
        if not written:
            raise ValueError(f"task source {spec.name!r}: the generator wrote no task into {folder} ({what})")
    return harbor_tasks(spec, folder, split, sc.heldout_frac)


def family_tasks(spec: SourceSpec, split: str, n: int, seed: int, levels: Sequence[int]) -> SourceTasks:
    """n tasks of a generated family (toy or pkg) of one content split (toy level 0 has 2 held-out contents, so
    its held-out tasks repeat)."""
    return SourceTasks(spec, tuple(family_module(spec.kind).task_set(n, seed, tuple(levels), split)), {})


def family_module(kind: str):
    """The module of a generated family (rl/tasks.py or rl/pkg_tasks.py): task_set, oracle and hidden check."""
    if kind not in FAMILIES:
        raise ValueError(f"{kind!r} is not a generated family; expected one of {FAMILIES}")
    return pkg_tasks if kind == "pkg" else toy


def required_tools(mix: str) -> tuple[str, ...]:
    """Tools a curriculum's families need beyond the toy's: the pkg family runs its tests (run_terminal_cmd)."""
    return ("run_terminal_cmd",) if any(s.kind == "pkg" for s in parse_mix(mix)) else ()


def warm_start_family(mix: str) -> str:
    """The family the SFT warm start's oracle demonstrates: the curriculum's first generated family (toy if none)."""
    return next((s.kind for s in parse_mix(mix) if s.kind in FAMILIES), "toy")
