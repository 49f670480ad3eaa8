"""Benchmark tasks in Harbor's layout (Terminal-Bench 2.0), and the loader that reads them.

A task is a folder:

    instruction.md            what the agent is told (nothing else about the task reaches it)
    task.toml                 Harbor's schema (bench/task_config.py)
    environment/Dockerfile    an image task: built by composer2_jax.env.images (with any other files of
                              environment/ as the build context); the agent works in the image's WORKDIR as root
    environment/repo/         or a workspace task: the starting repository (or environment/repo.tar.gz|.tgz|.zip),
                              run in a host-rootfs sandbox at /workspace; environment/generate.py (optional) adds
                              generated files to it at load time
    solution/solve.sh         the oracle (other files of solution/ beside it)
    tests/test.sh             hidden: copied in only at grading, writes /logs/verifier/reward.txt or reward.json
    steps/<name>/             a multi-step task ([[steps]] in task.toml): instruction.md, tests/, solution/,
                              workdir/ (copied into the working directory before the step; workdir/setup.sh runs)

    environment/docker-compose.yaml   a multi-container task (bench/compose.py): the agent works in its main service

A task this runner cannot run (compose keys beyond bench/compose.py's subset, GPUs, Windows, a base image with no
local stand-in) loads as
`Unsupported` with the reason. A folder that is not a task at all (no instruction.md, bad TOML, unknown
difficulty) raises `TaskError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from composer2_jax.bench import shared_files
from composer2_jax.bench.compose import ComposeError, ComposeSpec, compose_file, parse_compose
from composer2_jax.bench.task_config import (  # noqa: F401  (re-exported: the task API lives here)
    DIFFICULTIES,
    StepConfig,
    TaskConfig,
    TaskError,
    parse_size_mb,
    parse_task_toml,
    resolve_env,
)
from composer2_jax.env.base_images import UnsupportedBase, map_base
from composer2_jax.env.dockerfile import DockerfileError, parse

SUITES_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"
ARCHIVES = ("repo.tar.gz", "repo.tgz", "repo.tar", "repo.zip")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of a multi-step task (a single-step task runs as one step named after the task)."""

    config: StepConfig
    instruction: str
    tests_dir: Path | None  # steps/<name>/tests, uploaded over the task's tests/ (None: the task's alone)
    solution_dir: Path | None  # steps/<name>/solution (with solve.sh), for the oracle
    workdir_dir: Path | None  # steps/<name>/workdir: copied into the working directory before the step


@dataclasses.dataclass(frozen=True)
class Task:
    """A loaded task; `repo_dir()` gives a workspace task's starting repository, `image_context` an image task's."""

    name: str
    path: Path
    instruction: str
    config: TaskConfig
    repo_source: Path | None  # environment/repo/ or an archive (workspace tasks)
    generator: Path | None  # environment/generate.py, run on a copy of the repo at materialisation
    tests_dir: Path | None  # tests/ (a multi-step task may give tests only per step)
    solution_dir: Path | None  # solution/ when it holds solve.sh
    image_context: Path | None = None  # environment/ when it holds a Dockerfile (image tasks)
    steps: tuple[Step, ...] = ()  # [[steps]] with their folders
    compose: ComposeSpec | None = None  # environment/docker-compose.yaml (multi-container tasks)

    @property
    def category(self) -> str:
        return self.config.category

    @property
    def difficulty(self) -> str:
        return self.config.difficulty

    @property
    def is_image(self) -> bool:
        """True when the task runs in an image sandbox (a Dockerfile or a docker_image)."""
        return (self.image_context is not None or self.compose is not None
                or (self.repo_source is None and self.config.docker_image is not None))

    def run_steps(self) -> tuple[Step, ...]:
        """The steps to run: the [[steps]], or the task itself as one step."""
        if self.steps:
            return self.steps
        return (Step(StepConfig(self.name), self.instruction, None, self.solution_dir, None),)

    def repo_dir(self, cache_dir: str | os.PathLike | None = None) -> Path:
        """The starting repository as a directory (archives and generators are materialised once in cache_dir)."""
        if self.repo_source is None:
            raise ValueError(f"task {self.name!r} is an image task; it has no repository")
        if self.generator is None and self.repo_source.is_dir():
            return self.repo_source
        return materialize(self, Path(cache_dir) if cache_dir else default_cache_dir())


@dataclasses.dataclass(frozen=True)
class Unsupported:
    """A task folder this runner cannot run, and why (e.g. its environment needs Docker)."""

    name: str
    path: Path
    reason: str


@dataclasses.dataclass(frozen=True)
class Suite:
    """The tasks of one suite version (folder), in name order, and the folders it could not run."""

    name: str
    path: Path
    tasks: tuple[Task, ...]
    unsupported: tuple[Unsupported, ...]

    def select(self, names: list[str] | None) -> Suite:
        """The suite restricted to the named tasks (all if names is empty); its `unsupported` keeps the named ones
        this runner cannot run (with their reasons); a name that is in neither list is a KeyError."""
        if not names:
            return self
        known = {t.name: t for t in self.tasks}
        unsupported = {u.name: u for u in self.unsupported}
        missing = [n for n in names if n not in known and n not in unsupported]
        if missing:
            raise KeyError(f"tasks {missing} are not in suite {self.name!r}; it has {sorted(known)} and, "
                           f"unsupported, {sorted(unsupported)}")
        return dataclasses.replace(self, tasks=tuple(known[n] for n in names if n in known),
                                   unsupported=tuple(unsupported[n] for n in names if n in unsupported))


# ---------------------------------------------------------------------------------------------------- loading


def _repo_source(env_dir: Path) -> Path | None:
    """environment/repo/ or the first repo archive present, else None."""
    if (env_dir / "repo").is_dir():
        return env_dir / "repo"
    return next((env_dir / a for a in ARCHIVES if (env_dir / a).is_file()), None)


def _compose(path: Path, config: TaskConfig) -> ComposeSpec | None:
    """The task's parsed compose file (its [environment] env interpolated), or None; ComposeError if unsupported."""
    found = compose_file(path / "environment")
    if found is None:
        return None
    return parse_compose(found, dict(config.env))


def _compose_problem(spec: ComposeSpec) -> str | None:
    """Why a service of a compose task cannot be built here (a base with no stand-in), or None."""
    try:
        for svc in spec.services:
            if svc.image is not None:
                map_base(svc.image)
                continue
            dockerfile = svc.context / svc.dockerfile
            for use in parse(dockerfile.read_text(), dict(svc.build_args), name=str(dockerfile)).uses:
                map_base(use.ref)
    except (UnsupportedBase, DockerfileError) as e:
        return f"{spec.path}: services.{svc.name}: {e}"
    return None


def _image_problem(path: Path, config: TaskConfig) -> str | None:
    """Why an image task cannot run here (its Dockerfile's or docker_image's base has no stand-in), or None."""
    dockerfile = path / "environment" / "Dockerfile"
    try:
        if dockerfile.is_file():
            for use in parse(dockerfile.read_text(), name=str(dockerfile)).uses:
                map_base(use.ref)
        elif config.docker_image:
            map_base(config.docker_image)
    except (UnsupportedBase, DockerfileError) as e:
        return str(e)
    return None


def _unsupported_reason(path: Path, config: TaskConfig) -> str | None:
    """Why this runner cannot run a task folder (compose keys it lacks, GPUs, Windows, an unmappable base), or None."""
    env_dir = path / "environment"
    if config.gpus > 0:
        return f"the task asks for {config.gpus} GPU(s); sandboxes have none"
    if (path / "tests" / "test.bat").is_file() and not (path / "tests" / "test.sh").is_file():
        return "tests/test.bat: Windows tasks are not supported"
    try:
        spec = _compose(path, config)
    except ComposeError as e:
        return str(e)
    if spec is not None:
        return _compose_problem(spec)
    if (env_dir / "Dockerfile").is_file() or (_repo_source(env_dir) is None and config.docker_image):
        return _image_problem(path, config)
    return None


def _load_steps(path: Path, config: TaskConfig) -> tuple[Step, ...]:
    """The [[steps]] with their folders; TaskError when a step lacks instruction.md or any test.sh."""
    steps = []
    for sc in config.steps:
        d = path / "steps" / sc.name
        if not (d / "instruction.md").is_file():
            raise TaskError(f"{d}: no instruction.md; expected one per [[steps]] entry")
        tests = d / "tests" if (d / "tests").is_dir() else None
        if not ((tests and (tests / "test.sh").is_file()) or (path / "tests" / "test.sh").is_file()):
            raise TaskError(f"{d}: no tests/test.sh here or in the task's tests/; expected a verifier for the step")
        solution = d / "solution" if (d / "solution" / "solve.sh").is_file() else None
        steps.append(Step(sc, (d / "instruction.md").read_text(), tests, solution,
                          d / "workdir" if (d / "workdir").is_dir() else None))
    return tuple(steps)


def load_task(path: str | os.PathLike) -> Task | Unsupported:
    """Load one task folder; tasks this runner cannot run come back as Unsupported, malformed ones raise TaskError."""
    path = Path(path).resolve()
    name = path.name
    if not _NAME.match(name):
        raise TaskError(f"task folder name {name!r}; expected letters, digits, '.', '_' or '-'")
    config = parse_task_toml(path / "task.toml")
    if not (path / "instruction.md").is_file() and not config.steps:
        raise TaskError(f"{path}: no instruction.md; expected a Harbor task folder")
    reason = _unsupported_reason(path, config)
    if reason is not None:
        return Unsupported(name, path, reason)
    shared_files.install(path)  # the verdict runner and the pinned-release script, from the repository's one copy
    env_dir = path / "environment"
    compose = _compose(path, config)
    image_context = env_dir if (env_dir / "Dockerfile").is_file() and compose is None else None
    source = None if image_context or compose else _repo_source(env_dir)
    if image_context is None and source is None and not config.docker_image and compose is None:
        raise TaskError(f"{path}: no environment; expected environment/Dockerfile, environment/repo/ or one of "
                        f"{ARCHIVES}")
    tests = path / "tests"
    if not (tests / "test.sh").is_file() and not config.steps:
        raise TaskError(f"{path}: no tests/test.sh; expected the hidden verifier entry point")
    if source is not None and config.steps:
        raise TaskError(f"{path}: [[steps]] need an image environment (environment/Dockerfile)")
    generator = env_dir / "generate.py"
    solution = path / "solution"
    instruction = (path / "instruction.md").read_text() if (path / "instruction.md").is_file() else ""
    return Task(name, path, instruction, config, source,
                generator if source is not None and generator.is_file() else None, tests if tests.is_dir() else None,
                solution if (solution / "solve.sh").is_file() else None, image_context, _load_steps(path, config),
                compose)


def suite_path(suite: str | os.PathLike) -> Path:
    """A suite name under benchmarks/tasks/ (e.g. 'v0'), or a path to a folder of task folders."""
    path = Path(suite)
    if not path.is_dir() and (SUITES_DIR / str(suite)).is_dir():
        path = SUITES_DIR / str(suite)
    if not path.is_dir():
        known = sorted(p.name for p in SUITES_DIR.iterdir() if p.is_dir()) if SUITES_DIR.is_dir() else []
        raise FileNotFoundError(f"suite {str(suite)!r} is neither a folder nor one of {known} in {SUITES_DIR}")
    return path.resolve()


def load_suite(suite: str | os.PathLike) -> Suite:
    """Every task folder (a folder with instruction.md) of a suite, sorted by name."""
    root = suite_path(suite)
    tasks, unsupported = [], []
    for child in sorted(root.iterdir()):
        if child.is_dir() and ((child / "instruction.md").is_file() or (child / "steps").is_dir()):
            loaded = load_task(child)
            (tasks if isinstance(loaded, Task) else unsupported).append(loaded)
    if not tasks and not unsupported:
        raise TaskError(f"suite folder {root} holds no task folders (folders with instruction.md or steps/)")
    return Suite(root.name, root, tuple(tasks), tuple(unsupported))


# ---------------------------------------------------------------------------------------------------- materialise


def default_cache_dir() -> Path:
    """Where generated and unpacked repositories are kept ($COMPOSER2_BENCH_CACHE or a dir under the temp dir)."""
    return Path(os.environ.get("COMPOSER2_BENCH_CACHE") or Path(tempfile.gettempdir()) / "composer2-bench-cache")


def _fingerprint(task: Task) -> str:
    """Hash of everything that determines the materialised repository."""
    h = hashlib.sha256()
    paths = [task.repo_source] if task.repo_source.is_file() else sorted(task.repo_source.rglob("*"))
    for p in paths + ([task.generator] if task.generator else []):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(task.path)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _unpack(archive: Path, dest: Path) -> None:
    """Extract a repo archive into dest, refusing members that leave it."""
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                target = (dest / member).resolve()
                if not str(target).startswith(str(dest.resolve()) + os.sep) and target != dest.resolve():
                    raise TaskError(f"{archive}: member {member!r} leaves the repository")
            zf.extractall(dest)
        return
    with tarfile.open(archive) as tf:
        if not hasattr(tarfile, "data_filter"):  # Python < 3.11.4: check members by hand
            for m in tf.getmembers():
                target = (dest / m.name).resolve()
                if m.issym() or m.islnk() or not str(target).startswith(str(dest.resolve())):
                    raise TaskError(f"{archive}: member {m.name!r} is a link or leaves the repository")
            tf.extractall(dest)
            return
        tf.extractall(dest, filter="data")


# A generator writes a task's production evidence (tens of MB) and replays a release's history, which takes minutes
# for an evidence task on a loaded machine (measured figures: docs/benchmark.md, "Suite v1"), so the bound is a hang
# guard, not a budget.
GENERATOR_TIMEOUT_S = 900


def materialize(task: Task, cache_dir: Path) -> Path:
    """Build the task's repository once under cache_dir (copy or unpack, then run the generator); its path."""
    final = cache_dir / f"{task.name}-{_fingerprint(task)}"
    if final.is_dir():
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{task.name}-", dir=cache_dir))
    try:
        repo = staging / "repo"
        if task.repo_source.is_dir():
            shutil.copytree(task.repo_source, repo, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            repo.mkdir()
            _unpack(task.repo_source, repo)
        if task.generator is not None:
            try:
                run = subprocess.run([sys.executable, "-I", str(task.generator), str(repo)], capture_output=True,
                                     text=True, timeout=GENERATOR_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired as e:
                raise TaskError(f"{task.generator} ran past GENERATOR_TIMEOUT_S = {GENERATOR_TIMEOUT_S} s (expected "
                                "a generator to finish within it: a hang, or a machine too loaded)") from e
            if run.returncode != 0:
                raise TaskError(f"{task.generator} failed with exit code {run.returncode}: {run.stderr[-2000:]}")
        try:
            os.rename(repo, final)
        except OSError:  # another process won the race; its copy is identical
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final
