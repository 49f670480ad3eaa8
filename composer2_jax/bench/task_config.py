"""task.toml as Harbor defines it (harbor.models.task.config), read into frozen dataclasses.

Sections and the keys honoured (Harbor's defaults in brackets):
    version | schema_version, [task] name/description/authors/keywords, [metadata] (anything; kept as written)
    [verifier]     timeout_sec [600], env {}, user [the image's USER]
    [agent]        timeout_sec [none], user [the image's USER]
    [environment]  build_timeout_sec [600], docker_image, cpus [1], memory_mb [2048] (or deprecated memory = "2G"),
                   storage_mb [10240] (or storage = "10G"), gpus [0], allow_internet [true], network_mode
                   (public | no-network | allowlist) with allowed_hosts, env {}, workdir, healthcheck {command,
                   interval_sec [5], timeout_sec [30], start_period_sec [0], start_interval_sec [5], retries [3]}
    [solution]     env {}
    [[steps]]      name, min_reward (number or {key: number}), [steps.agent] timeout_sec/user,
                   [steps.verifier] timeout_sec/env/user, healthcheck; multi_step_reward_strategy mean | final [mean]
Ours: [environment.egress] (an EgressPolicy: which hosts/ports a task with internet may reach; default any host).
Environment-variable tables may use ${VAR} and ${VAR:-default} from the host (`resolve_env`, at run time).
A key Harbor does not define is kept in `unknown_keys` and logged once per process; keys Harbor defines that this
runner does not apply (mcp_servers, skills_dir, gpu_types, separate verifier environments, artifacts, ...) are
`ignored_keys`, logged the same way.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

import tomllib

from composer2_jax.env.egress_policy import EgressPolicy

log = logging.getLogger(__name__)
DIFFICULTIES = ("easy", "medium", "hard", "unknown")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
KNOWN = {  # Harbor's keys per section (the ones applied here and the ones only recorded)
    "": {"version", "schema_version", "task", "metadata", "verifier", "agent", "environment", "solution", "steps",
         "multi_step_reward_strategy", "source"},
    "verifier": {"timeout_sec", "env", "user", "network_mode", "allowed_hosts"},
    "agent": {"timeout_sec", "user", "network_mode", "allowed_hosts"},
    "environment": {"build_timeout_sec", "docker_image", "cpus", "memory_mb", "storage_mb", "memory", "storage", "gpus",
                    "gpu_types", "allow_internet", "network_mode", "allowed_hosts", "mcp_servers", "env", "skills_dir",
                    "healthcheck", "workdir", "egress", "os"},
    "solution": {"env"},
    "steps": {"name", "min_reward", "agent", "verifier", "healthcheck", "artifacts", "contributes_to_reward"},
}
IGNORED = {"environment.mcp_servers", "environment.skills_dir", "environment.gpu_types", "steps.artifacts",
           "verifier.network_mode", "verifier.allowed_hosts", "agent.network_mode", "agent.allowed_hosts", "source"}
_warned: set[str] = set()
_warned_lock = threading.Lock()


class TaskError(ValueError):
    """A task folder is malformed; the message names the file and what was expected."""


@dataclasses.dataclass(frozen=True)
class Healthcheck:
    """[environment].healthcheck: a command that must succeed before the agent starts (Docker HEALTHCHECK rules)."""

    command: str
    interval_sec: float = 5.0  # between attempts after the start period
    timeout_sec: float = 30.0  # per attempt
    start_period_sec: float = 0.0  # failures during it do not count
    start_interval_sec: float = 5.0  # between attempts during the start period
    retries: int = 3  # consecutive failures (after the start period) that fail the trial


@dataclasses.dataclass(frozen=True)
class StepConfig:
    """One [[steps]] entry; None fields fall back to the task's [agent] / [verifier]."""

    name: str
    min_reward: float | dict[str, float] | None = None  # stop the trial when this step's reward is below it
    agent_timeout_s: float | None = None  # [steps.agent] timeout_sec
    agent_user: str | None = None  # [steps.agent] user
    verifier_timeout_s: float | None = None  # [steps.verifier] timeout_sec
    verifier_user: str | None = None  # [steps.verifier] user
    verifier_env: tuple[tuple[str, str], ...] = ()  # [steps.verifier] env (added to the task's)
    healthcheck: Healthcheck | None = None  # run before this step's agent
    contributes_to_reward: bool = True  # counted by multi_step_reward_strategy


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """task.toml: Harbor's keys with Harbor's defaults (see the module docstring), and our egress policy."""

    difficulty: str = "unknown"  # [metadata] difficulty
    category: str = "uncategorized"  # [metadata] category
    tags: tuple[str, ...] = ()  # [metadata] tags
    verifier_timeout_s: float = 600.0  # [verifier] timeout_sec: wall-clock limit of tests/test.sh
    agent_timeout_s: float | None = None  # [agent] timeout_sec: wall-clock limit of the agent (None: none)
    build_timeout_s: float = 600.0  # [environment] build_timeout_sec: limit of the image build
    cpus: float = 1.0  # [environment] cpus
    memory_mb: int = 2048  # [environment] memory_mb (or memory)
    storage_mb: int = 10240  # [environment] storage_mb (or storage)
    gpus: int = 0  # [environment] gpus (more than 0 is unsupported here)
    allow_internet: bool = True  # [environment] allow_internet (Harbor's default: true)
    network_mode: str | None = None  # [environment] network_mode: public | no-network | allowlist
    allowed_hosts: tuple[str, ...] = ()  # [environment] allowed_hosts (network_mode = allowlist)
    egress: EgressPolicy = EgressPolicy()  # [environment.egress]: the hosts/ports a task may reach when allowed
    docker_image: str | None = None  # [environment] docker_image: a prebuilt image instead of a Dockerfile
    workdir: str | None = None  # [environment] workdir: overrides the image's WORKDIR
    env: tuple[tuple[str, str], ...] = ()  # [environment] env: every command's environment (unresolved)
    healthcheck: Healthcheck | None = None  # [environment] healthcheck
    verifier_env: tuple[tuple[str, str], ...] = ()  # [verifier] env (unresolved)
    verifier_user: str | None = None  # [verifier] user (None: the image's USER)
    agent_user: str | None = None  # [agent] user (None: the image's USER)
    solution_env: tuple[tuple[str, str], ...] = ()  # [solution] env, for the oracle (unresolved)
    steps: tuple[StepConfig, ...] = ()  # [[steps]]
    multi_step_reward_strategy: str = "mean"  # mean (per key, over steps) | final (the last step's)
    package: dict[str, Any] = dataclasses.field(default_factory=dict)  # [task]
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)  # all of [metadata], as written
    unknown_keys: tuple[str, ...] = ()  # keys Harbor does not define (kept, warned once)
    ignored_keys: tuple[str, ...] = ()  # Harbor keys this runner does not apply (warned once)

    @property
    def network_policy(self) -> EgressPolicy:
        """The sandbox egress policy: deny all without internet, the allow list, or [environment.egress] (any host)."""
        mode = self.network_mode or ("public" if self.allow_internet else "no-network")
        if mode == "no-network":
            return EgressPolicy()
        if mode == "allowlist":
            return dataclasses.replace(self.egress, allow_hosts=self.allowed_hosts)
        return self.egress if self.egress.allow_hosts else dataclasses.replace(self.egress, allow_hosts=("*",))


def resolve_env(pairs: tuple[tuple[str, str], ...], where: str, environ: dict[str, str] | None = None) -> dict:
    """An env table with ${VAR} / ${VAR:-default} taken from the host; TaskError naming a missing variable."""
    environ = os.environ if environ is None else environ

    def one(m: re.Match) -> str:
        if m.group(1) in environ:
            return environ[m.group(1)]
        if m.group(2) is not None:
            return m.group(2)
        raise TaskError(f"{where}: ${{{m.group(1)}}} is not set on the host (give a default: ${{VAR:-value}})")

    return {k: _ENV_REF.sub(one, v) for k, v in pairs}


def warn_once(key: str, message: str) -> None:
    """Log a warning the first time key is seen in this process."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning(message)


def _section(doc: dict, key: str, where: Path) -> dict:
    """A TOML table, empty if missing, or a TaskError if the key holds something else."""
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise TaskError(f"{where}: [{key}] must be a table, got {type(value).__name__}")
    return value


def _number(table: dict, key: str, default: float | None, where: str) -> float | None:
    """A positive number from a table (default if missing)."""
    value = table.get(key, default)
    if value is None:
        return None
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


def _env_table(table: dict, key: str, where: str) -> tuple[tuple[str, str], ...]:
    """A {name: string} table as pairs."""
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float)) for v in value.values()):
        raise TaskError(f"{where}.{key} = {value!r}; expected a table of strings")
    return tuple((str(k), str(v)) for k, v in value.items())


def _user(table: dict, where: str) -> str | None:
    """A user key: a name or a uid."""
    value = table.get("user")
    if value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None if value is None else str(value)
    raise TaskError(f"{where}.user = {value!r}; expected a user name or uid")


def _healthcheck(value: Any, where: str) -> Healthcheck | None:
    """A healthcheck table."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("command"), str):
        raise TaskError(f"{where}.healthcheck = {value!r}; expected a table with a command string")
    fields = {f.name for f in dataclasses.fields(Healthcheck)}
    try:
        return Healthcheck(**{k: v for k, v in value.items() if k in fields})
    except TypeError as e:
        raise TaskError(f"{where}.healthcheck: {e}") from None


def _min_reward(value: Any, where: str) -> float | dict[str, float] | None:
    """A step's min_reward: a number or a {key: number} table."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value if value is None else float(value)
    if isinstance(value, dict) and all(isinstance(v, (int, float)) for v in value.values()):
        return {str(k): float(v) for k, v in value.items()}
    raise TaskError(f"{where}.min_reward = {value!r}; expected a number or a table of numbers")


def _step(table: Any, i: int, where: Path) -> StepConfig:
    """One [[steps]] table."""
    name_where = f"{where}: steps[{i}]"
    if not isinstance(table, dict) or not isinstance(table.get("name"), str):
        raise TaskError(f"{name_where}: expected a table with a name")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", table["name"]):
        raise TaskError(f"{name_where}.name = {table['name']!r}; expected letters, digits, '.', '_' or '-'")
    agent, verifier = _section(table, "agent", where), _section(table, "verifier", where)
    return StepConfig(
        table["name"], _min_reward(table.get("min_reward"), name_where),
        _number(agent, "timeout_sec", None, f"{name_where}.agent"), _user(agent, f"{name_where}.agent"),
        _number(verifier, "timeout_sec", None, f"{name_where}.verifier"), _user(verifier, f"{name_where}.verifier"),
        _env_table(verifier, "env", f"{name_where}.verifier"), _healthcheck(table.get("healthcheck"), name_where),
        bool(table.get("contributes_to_reward", table.get("contributes_to_mean", True))))


def _key_report(doc: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(unknown keys, ignored keys) of a task.toml document, as dotted paths."""
    unknown, ignored = [], []
    for key, value in doc.items():
        if key not in KNOWN[""]:
            unknown.append(key)
        elif key in KNOWN and key != "steps" and isinstance(value, dict):
            unknown += [f"{key}.{k}" for k in value if k not in KNOWN[key]]
            ignored += [f"{key}.{k}" for k in value if f"{key}.{k}" in IGNORED and value[k] not in ({}, [], None)]
        elif key in IGNORED:
            ignored.append(key)
    for step in doc.get("steps") or []:
        if isinstance(step, dict):
            unknown += sorted({f"steps.{k}" for k in step if k not in KNOWN["steps"]})
            ignored += sorted({f"steps.{k}" for k in step if f"steps.{k}" in IGNORED})
    return tuple(dict.fromkeys(unknown)), tuple(dict.fromkeys(ignored))


def parse_task_toml(path: Path) -> TaskConfig:
    """Read a task.toml (a missing file gives the defaults) into a TaskConfig; TaskError naming a bad value."""
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
    allow = env.get("allow_internet", True)
    if not isinstance(allow, bool):
        raise TaskError(f"{path}: environment.allow_internet = {allow!r}; expected true or false")
    mode = env.get("network_mode")
    hosts = env.get("allowed_hosts", [])
    if mode not in (None, "public", "no-network", "allowlist") or not isinstance(hosts, list):
        raise TaskError(f"{path}: environment.network_mode = {mode!r}, allowed_hosts = {hosts!r}; expected public | "
                        "no-network | allowlist and a list of host names")
    steps = doc.get("steps") or []
    strategy = doc.get("multi_step_reward_strategy") or "mean"
    if not isinstance(steps, list) or strategy not in ("mean", "final"):
        raise TaskError(f"{path}: steps must be an array of tables and multi_step_reward_strategy mean | final, "
                        f"got {type(steps).__name__} and {strategy!r}")
    step_configs = tuple(_step(t, i, path) for i, t in enumerate(steps))
    if len({s.name for s in step_configs}) != len(step_configs):
        raise TaskError(f"{path}: step names {[s.name for s in step_configs]} are not unique")
    unknown, ignored = _key_report(doc)
    for key in unknown:
        warn_once(f"unknown:{key}", f"task.toml key {key!r} (first seen in {path}) is not Harbor's; kept, not used")
    for key in ignored:
        warn_once(f"ignored:{key}", f"task.toml key {key!r} (first seen in {path}) is not applied by this runner")
    return TaskConfig(
        difficulty=difficulty, category=str(meta.get("category", "uncategorized")), tags=tuple(tags),
        verifier_timeout_s=_number(verifier, "timeout_sec", 600.0, f"{path}: verifier"),
        agent_timeout_s=_number(agent, "timeout_sec", None, f"{path}: agent"),
        build_timeout_s=_number(env, "build_timeout_sec", 600.0, f"{path}: environment"),
        cpus=_number(env, "cpus", 1.0, f"{path}: environment"),
        memory_mb=parse_size_mb(env.get("memory_mb", env.get("memory", 2048)), f"{path}: environment.memory_mb"),
        storage_mb=parse_size_mb(env.get("storage_mb", env.get("storage", 10240)), f"{path}: environment.storage_mb"),
        gpus=int(env.get("gpus", 0)), allow_internet=allow, network_mode=mode,
        allowed_hosts=tuple(str(h).lower() for h in hosts), egress=_egress(env, path),
        docker_image=env.get("docker_image") or None, workdir=env.get("workdir") or None,
        env=_env_table(env, "env", f"{path}: environment"),
        healthcheck=_healthcheck(env.get("healthcheck"), f"{path}: environment"),
        verifier_env=_env_table(verifier, "env", f"{path}: verifier"),
        verifier_user=_user(verifier, f"{path}: verifier"), agent_user=_user(agent, f"{path}: agent"),
        solution_env=_env_table(_section(doc, "solution", path), "env", f"{path}: solution"),
        steps=step_configs, multi_step_reward_strategy=strategy, package=dict(_section(doc, "task", path)),
        metadata=dict(meta), unknown_keys=unknown, ignored_keys=ignored)


def _egress(env: dict, where: Path) -> EgressPolicy:
    """[environment.egress] as an EgressPolicy."""
    table = env.get("egress", {})
    if not isinstance(table, dict):
        raise TaskError(f"{where}: [environment.egress] must be a table")
    try:
        return EgressPolicy.from_dict(table)
    except (TypeError, ValueError) as e:
        raise TaskError(f"{where}: [environment.egress]: {e}") from None
