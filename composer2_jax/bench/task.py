"""Benchmark tasks in Terminal-Bench 2.0's Harbor layout, and the loader that reads them.

A task is a folder:

    instruction.md            what the agent is told (nothing else about the task reaches it)
    task.toml                 [metadata] difficulty/category/tags, [verifier] timeout_sec, [agent] timeout_sec,
                              [environment] cpus/memory_mb/storage_mb/allow_internet (+ [environment.egress])
    environment/repo/         the starting repository, or environment/repo.tar.gz|.tgz|.zip in its place;
                              environment/generate.py (optional) adds generated files to it at load time
    solution/solve.sh         the oracle, run from the repository root (other files of solution/ beside it)
    tests/test.sh             hidden: copied in only at grading, writes $LOGS_DIR/verifier/reward.txt

Real Harbor tasks build their environment from environment/Dockerfile (or docker-compose.yaml); this runner has
bubblewrap sandboxes over the host's system, not Docker, so such a task loads as `Unsupported` with the reason.
A folder that is not a task at all (no instruction.md, bad TOML, unknown difficulty) raises `TaskError`.
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
from typing import Any

import tomllib

from composer2_jax.env.egress_policy import EgressPolicy

SUITES_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"
DIFFICULTIES = ("easy", "medium", "hard", "unknown")
ARCHIVES = ("repo.tar.gz", "repo.tgz", "repo.tar", "repo.zip")
DOCKER_FILES = ("Dockerfile", "docker-compose.yaml", "docker-compose.yml")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)


class TaskError(ValueError):
    """A task folder is malformed; the message names the file and what was expected."""


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """task.toml, with Harbor's keys (deprecated spellings `memory`/`storage` accepted) and our egress policy."""

    difficulty: str = "unknown"
    category: str = "uncategorized"
    tags: tuple[str, ...] = ()
    verifier_timeout_s: float = 120.0  # [verifier] timeout_sec: wall-clock limit of tests/test.sh
    agent_timeout_s: float = 900.0  # [agent] timeout_sec: wall-clock limit of the agent's episode
    cpus: float = 1.0  # [environment] cpus
    memory_mb: int = 2048  # [environment] memory_mb
    storage_mb: int = 1024  # [environment] storage_mb
    allow_internet: bool = False  # [environment] allow_internet (Harbor); False = deny all egress
    egress: EgressPolicy = EgressPolicy()  # [environment.egress]: the hosts/ports a task may reach when allowed
    docker_image: str | None = None  # [environment] docker_image (Harbor): a prebuilt image; needs Docker
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)  # all of [metadata], as written

    @property
    def network_policy(self) -> EgressPolicy:
        """The sandbox egress policy: deny-all unless allow_internet, then [environment.egress] (default: any host)."""
        if not self.allow_internet:
            return EgressPolicy()
        return self.egress if self.egress.allow_hosts else dataclasses.replace(self.egress, allow_hosts=("*",))


@dataclasses.dataclass(frozen=True)
class Task:
    """A loaded task; `repo_dir()` gives a directory holding its starting repository."""

    name: str
    path: Path
    instruction: str
    config: TaskConfig
    repo_source: Path  # environment/repo/ or an archive
    generator: Path | None  # environment/generate.py, run on a copy of the repo at materialisation
    tests_dir: Path
    solution_dir: Path | None

    @property
    def category(self) -> str:
        return self.config.category

    @property
    def difficulty(self) -> str:
        return self.config.difficulty

    def repo_dir(self, cache_dir: str | os.PathLike | None = None) -> Path:
        """The starting repository as a directory (archives and generators are materialised once in cache_dir)."""
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
        """The suite restricted to the named tasks (all if names is empty); unknown names are an error."""
        if not names:
            return self
        known = {t.name: t for t in self.tasks}
        missing = [n for n in names if n not in known]
        if missing:
            raise KeyError(f"tasks {missing} are not in suite {self.name!r}; it has {sorted(known)}")
        return dataclasses.replace(self, tasks=tuple(known[n] for n in names),
                                   unsupported=tuple(u for u in self.unsupported if u.name in names))


# ---------------------------------------------------------------------------------------------------- task.toml


def _section(doc: dict, key: str, where: Path) -> dict:
    """A TOML table, empty if missing, or a TaskError if the key holds something else."""
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise TaskError(f"{where}: [{key}] must be a table, got {type(value).__name__}")
    return value


def _number(table: dict, key: str, default: float, where: str) -> float:
    """A positive number from a table (default if missing)."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TaskError(f"{where}.{key} = {value!r}; expected a positive number")
    return float(value)


def parse_size_mb(value: Any, where: str) -> int:
    """Megabytes from an int (MB) or a Harbor size string like '2G', '512M', '4GiB'."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _SIZE.match(value) if isinstance(value, str) else None
    if not m:
        raise TaskError(f"{where} = {value!r}; expected megabytes (int) or a size like '2G' / '512M'")
    scale = {"": 1 / (1 << 20), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1 << 20}[m.group(2).upper()]
    return max(1, int(float(m.group(1)) * scale))


def _egress(env: dict, where: Path) -> EgressPolicy:
    """[environment.egress] as an EgressPolicy."""
    table = env.get("egress", {})
    if not isinstance(table, dict):
        raise TaskError(f"{where}: [environment.egress] must be a table")
    try:
        return EgressPolicy.from_dict(table)
    except (TypeError, ValueError) as e:
        raise TaskError(f"{where}: [environment.egress]: {e}") from None


def parse_task_toml(path: Path) -> TaskConfig:
    """Read a task.toml (a missing file gives the defaults) into a TaskConfig."""
    if not path.exists():
        return TaskConfig()
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: not valid TOML: {e}") from None
    meta, env = _section(doc, "metadata", path), _section(doc, "environment", path)
    verifier, agent = _section(doc, "verifier", path), _section(doc, "agent", path)
    difficulty = str(meta.get("difficulty", "unknown")).lower()
    if difficulty not in DIFFICULTIES:
        raise TaskError(f"{path}: metadata.difficulty = {meta['difficulty']!r}; expected one of {DIFFICULTIES}")
    tags = meta.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskError(f"{path}: metadata.tags = {tags!r}; expected a list of strings")
    allow = env.get("allow_internet", False)
    if not isinstance(allow, bool):
        raise TaskError(f"{path}: environment.allow_internet = {allow!r}; expected true or false")
    return TaskConfig(
        difficulty=difficulty, category=str(meta.get("category", "uncategorized")), tags=tuple(tags),
        verifier_timeout_s=_number(verifier, "timeout_sec", 120.0, f"{path}: verifier"),
        agent_timeout_s=_number(agent, "timeout_sec", 900.0, f"{path}: agent"),
        cpus=_number(env, "cpus", 1.0, f"{path}: environment"),
        memory_mb=parse_size_mb(env.get("memory_mb", env.get("memory", 2048)), f"{path}: environment.memory_mb"),
        storage_mb=parse_size_mb(env.get("storage_mb", env.get("storage", 1024)), f"{path}: environment.storage_mb"),
        allow_internet=allow, egress=_egress(env, path), docker_image=env.get("docker_image") or None,
        metadata=dict(meta))


# ---------------------------------------------------------------------------------------------------- loading


def _repo_source(env_dir: Path) -> Path | None:
    """environment/repo/ or the first repo archive present, else None."""
    if (env_dir / "repo").is_dir():
        return env_dir / "repo"
    return next((env_dir / a for a in ARCHIVES if (env_dir / a).is_file()), None)


def load_task(path: str | os.PathLike) -> Task | Unsupported:
    """Load one task folder; Docker-only environments come back as Unsupported, malformed folders raise TaskError."""
    path = Path(path).resolve()
    name = path.name
    if not _NAME.match(name):
        raise TaskError(f"task folder name {name!r}; expected letters, digits, '.', '_' or '-'")
    if not (path / "instruction.md").is_file():
        raise TaskError(f"{path}: no instruction.md; expected a Harbor task folder")
    config = parse_task_toml(path / "task.toml")
    env_dir = path / "environment"
    source = _repo_source(env_dir)
    if source is None:
        docker = [f for f in DOCKER_FILES if (env_dir / f).is_file()]
        if docker or config.docker_image:
            what = f"environment/{docker[0]}" if docker else f"the docker_image {config.docker_image!r}"
            return Unsupported(name, path, f"the environment is built from {what}, which needs Docker; these "
                                           "sandboxes run the host's system, so give the starting repository as "
                                           f"environment/repo/ or one of {', '.join(ARCHIVES)}")
        raise TaskError(f"{path}: no starting repository; expected environment/repo/ or one of {ARCHIVES}")
    tests = path / "tests"
    if not (tests / "test.sh").is_file():
        raise TaskError(f"{path}: no tests/test.sh; expected the hidden verifier entry point")
    generator = env_dir / "generate.py"
    solution = path / "solution"
    return Task(name, path, (path / "instruction.md").read_text(), config, source,
                generator if generator.is_file() else None, tests,
                solution if (solution / "solve.sh").is_file() else None)


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
        if child.is_dir() and (child / "instruction.md").is_file():
            loaded = load_task(child)
            (tasks if isinstance(loaded, Task) else unsupported).append(loaded)
    if not tasks and not unsupported:
        raise TaskError(f"suite folder {root} holds no task folders (folders with instruction.md)")
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
            run = subprocess.run([sys.executable, "-I", str(task.generator), str(repo)], capture_output=True,
                                 text=True, timeout=300, check=False)
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
