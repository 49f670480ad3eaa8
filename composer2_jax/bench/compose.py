"""Multi-container tasks: environment/docker-compose.yaml, the subset published Harbor / Terminal-Bench 2 tasks use.

    spec = parse_compose(task_dir / "environment" / "docker-compose.yaml")
    snap = import_compose(env, spec, build)      # one image snapshot per service
    group = fork_compose(env, snap, policy)      # every service started, in depends_on order; group.main is the agent's
    group.snapshot(); group.close()

Supported keys: top level `services` (and `version`, `name`, which change nothing); per service `build` (a context
string, or `context` / `dockerfile` / `args`), `image`, `environment` (a mapping or a list of K=V), `command` (a
string, split as the shell would, or a list), `depends_on` (a list, or a mapping with `condition: service_started |
service_healthy`), `healthcheck` (`test`, `interval`, `timeout`, `retries`, `start_period`, `start_interval`,
`disable`), `container_name` and `hostname` (more names for the service), `working_dir`, `expose`. Anything else
(ports, volumes, networks, privileged, ...) is a ComposeError naming the key and the file. `${VAR}`, `${VAR:-default}`
and `$VAR` are interpolated from CONTEXT_DIR (the environment/ folder) and the task's [environment] env; an unset
variable is empty, as in Docker Compose.

The agent runs in the service named `main` (Harbor's convention; `client`, Terminal-Bench 1's, also counts). A compose
file without either gets Harbor's own main service: environment/Dockerfile built, Harbor's keep-alive command. The
main service's image follows the task's [environment] workdir; the others run their `command` (or the image's CMD)
after their ENTRYPOINT, restarted at every fork as a container's are.

Every service is its own image sandbox (its own root file system, processes and limits); they share one private
network namespace (env/netns.py: loopback only, service names are /etc/hosts names of 127.0.0.1), so services reach
each other by name and nothing else; egress still goes through each sandbox's proxy relay and policy. A snapshot
is one snapshot per service, so forks and restores cover every service's files.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from composer2_jax.bench.task_config import Healthcheck

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml")
MAIN_NAMES = ("main", "client")  # Harbor's main service, then Terminal-Bench 1's
TOP_KEYS = ("services", "version", "name")
SERVICE_KEYS = ("build", "image", "environment", "command", "depends_on", "healthcheck", "container_name",
                "hostname", "working_dir", "expose")
BUILD_KEYS = ("context", "dockerfile", "args")
HEALTH_KEYS = ("test", "interval", "timeout", "retries", "start_period", "start_interval", "disable")
DEPENDS_KEYS = ("condition",)
CONDITIONS = ("service_started", "service_healthy")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VAR = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)")


class ComposeError(ValueError):
    """A compose file this runner cannot run as written; the message names the file and the key."""


@dataclasses.dataclass(frozen=True)
class Service:
    """One service of a compose file."""

    name: str
    context: Path | None  # build context (None: `image`)
    dockerfile: str = "Dockerfile"  # relative to the context
    build_args: tuple[tuple[str, str], ...] = ()
    image: str | None = None  # a public image, used as a one-line Dockerfile
    environment: tuple[tuple[str, str], ...] = ()
    command: tuple[str, ...] | None = None  # None: the image's CMD (main: Harbor's keep-alive)
    depends_on: tuple[tuple[str, str], ...] = ()  # (service, condition)
    healthcheck: Healthcheck | None = None
    aliases: tuple[str, ...] = ()  # container_name, hostname
    working_dir: str | None = None


@dataclasses.dataclass(frozen=True)
class ComposeSpec:
    """A parsed compose file: its services in start order (every service after the ones it depends on)."""

    path: Path
    services: tuple[Service, ...]
    main: str

    def service(self, name: str) -> Service:
        """The named service."""
        return next(s for s in self.services if s.name == name)

    def names(self) -> tuple[str, ...]:
        """Every host name of the task's network: service names and their aliases."""
        return tuple(dict.fromkeys(n for s in self.services for n in (s.name, *s.aliases)))


def compose_file(env_dir: Path) -> Path | None:
    """environment/docker-compose.yaml (or .yml), if the task has one."""
    return next((env_dir / f for f in COMPOSE_FILES if (env_dir / f).is_file()), None)


# ---------------------------------------------------------------------------------------------------- parsing


def _interpolate(value: Any, variables: Mapping[str, str]) -> Any:
    """Docker Compose's variable interpolation in every string of a loaded YAML tree."""
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            if m.group(0) == "$$":
                return "$"
            name = m.group(1) or m.group(3)
            got = variables.get(name, "")
            return got if got or m.group(2) is None else m.group(2)
        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        return {k: _interpolate(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, variables) for v in value]
    return value


def _check_keys(value: Any, allowed: tuple[str, ...], where: str, path: Path) -> dict:
    """value as a mapping whose keys are all in allowed; ComposeError naming the first other key."""
    if not isinstance(value, dict):
        raise ComposeError(f"{path}: {where} = {value!r}; expected a mapping")
    for key in value:
        if key not in allowed:
            raise ComposeError(f"{path}: {where}.{key}: the key {key!r} is not supported (supported here: "
                               f"{', '.join(allowed)})")
    return value


def parse_duration(value: Any, where: str, path: Path) -> float:
    """A compose duration ("1m30s", "500ms", "10s") or a number of seconds, in seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ComposeError(f"{path}: {where} = {value!r}; expected a duration such as '10s', '1m30s' or '500ms'")
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
    return sum(float(n) * scale[u] for n, u in parts)


def _healthcheck(value: Any, where: str, path: Path) -> Healthcheck | None:
    """A service's healthcheck as the runner's Healthcheck (None when absent or disabled)."""
    hc = _check_keys(value, HEALTH_KEYS, where, path)
    test = hc.get("test")
    if hc.get("disable") or test in (["NONE"], None):
        return None
    if isinstance(test, str):
        command = test
    elif isinstance(test, list) and len(test) >= 2 and test[0] == "CMD-SHELL":
        command = " ".join(str(t) for t in test[1:])
    elif isinstance(test, list) and len(test) >= 2 and test[0] == "CMD":
        command = shlex.join(str(t) for t in test[1:])
    else:
        raise ComposeError(f"{path}: {where}.test = {test!r}; expected a string, [\"CMD\", ...] or "
                           "[\"CMD-SHELL\", \"...\"]")
    times = {key: parse_duration(hc[key], f"{where}.{key}", path) for key in
             ("interval", "timeout", "start_period", "start_interval") if key in hc}
    retries = hc.get("retries", 3)
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 1:
        raise ComposeError(f"{path}: {where}.retries = {retries!r}; expected an integer >= 1")
    return Healthcheck(command, interval_sec=times.get("interval", 30.0), timeout_sec=times.get("timeout", 30.0),
                       start_period_sec=times.get("start_period", 0.0),
                       start_interval_sec=times.get("start_interval", 5.0), retries=retries)


def _environment(value: Any, where: str, path: Path) -> tuple[tuple[str, str], ...]:
    """`environment:` as (name, value) pairs (a mapping or a list of NAME=value / NAME)."""
    if isinstance(value, dict):
        return tuple((str(k), "" if v is None else str(v).lower() if isinstance(v, bool) else str(v))
                     for k, v in value.items())
    if isinstance(value, list):
        return tuple(tuple(str(e).split("=", 1)) if "=" in str(e) else (str(e), "") for e in value)
    raise ComposeError(f"{path}: {where} = {value!r}; expected a mapping or a list of NAME=value")


def _command(value: Any, where: str, path: Path) -> tuple[str, ...]:
    """`command:` as an argv (a string is split as a shell would)."""
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if isinstance(value, list) and value:
        return tuple(str(v) for v in value)
    raise ComposeError(f"{path}: {where} = {value!r}; expected a string or a non-empty list")


def _depends_on(value: Any, where: str, path: Path) -> tuple[tuple[str, str], ...]:
    """`depends_on:` as (service, condition) pairs."""
    if isinstance(value, list):
        return tuple((str(v), "service_started") for v in value)
    if not isinstance(value, dict):
        raise ComposeError(f"{path}: {where} = {value!r}; expected a list of services or a mapping")
    deps = []
    for name, cond in value.items():
        cond = _check_keys(cond or {}, DEPENDS_KEYS, f"{where}.{name}", path).get("condition", "service_started")
        if cond not in CONDITIONS:
            raise ComposeError(f"{path}: {where}.{name}.condition = {cond!r} is not supported; expected one of "
                               f"{CONDITIONS}")
        deps.append((str(name), cond))
    return tuple(deps)


def _build(value: Any, env_dir: Path, where: str, path: Path) -> tuple[Path, str, tuple[tuple[str, str], ...]]:
    """`build:` as (context, dockerfile, args); the context must stay inside environment/."""
    if isinstance(value, str):
        value = {"context": value}
    b = _check_keys(value, BUILD_KEYS, where, path)
    context = (env_dir / str(b.get("context", "."))).resolve()
    if not (context == env_dir.resolve() or env_dir.resolve() in context.parents) or not context.is_dir():
        raise ComposeError(f"{path}: {where}.context = {b.get('context')!r}; expected a folder inside {env_dir}")
    dockerfile = str(b.get("dockerfile", "Dockerfile"))
    if not (context / dockerfile).is_file():
        raise ComposeError(f"{path}: {where}.dockerfile: no {dockerfile} in {context}")
    args = b.get("args") or {}
    return context, dockerfile, _environment(args, f"{where}.args", path)


def _service(name: str, raw: Any, env_dir: Path, path: Path) -> Service:
    """One `services:` entry."""
    where = f"services.{name}"
    if not _NAME.match(str(name)):
        raise ComposeError(f"{path}: service name {name!r}; expected letters, digits, '.', '_' or '-'")
    s = _check_keys(raw or {}, SERVICE_KEYS, where, path)
    context, dockerfile, args = (None, "Dockerfile", ())
    if "build" in s:
        context, dockerfile, args = _build(s["build"], env_dir, f"{where}.build", path)
    elif "image" not in s:
        if name not in MAIN_NAMES:
            raise ComposeError(f"{path}: {where} has neither build nor image; expected one of them")
        context = env_dir  # Harbor's base compose builds the main service from environment/
    aliases = tuple(str(s[k]) for k in ("container_name", "hostname") if k in s)
    for alias in aliases:
        if not _NAME.match(alias):
            raise ComposeError(f"{path}: {where}: host name {alias!r}; expected letters, digits, '.', '_' or '-'")
    return Service(str(name), context, dockerfile, args, None if context else str(s["image"]),
                   _environment(s.get("environment", {}), f"{where}.environment", path),
                   _command(s["command"], f"{where}.command", path) if "command" in s else None,
                   _depends_on(s.get("depends_on", []), f"{where}.depends_on", path),
                   _healthcheck(s["healthcheck"], f"{where}.healthcheck", path) if "healthcheck" in s else None,
                   aliases, s.get("working_dir"))


def _start_order(services: dict[str, Service], path: Path) -> tuple[Service, ...]:
    """Services ordered so each comes after its dependencies; ComposeError for unknown names and cycles."""
    order: list[Service] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "open":
            raise ComposeError(f"{path}: depends_on cycle {' -> '.join(chain + (name,))}")
        state[name] = "open"
        for dep, _ in services[name].depends_on:
            if dep not in services:
                raise ComposeError(f"{path}: services.{name}.depends_on names {dep!r}; the services are "
                                   f"{sorted(services)}")
            visit(dep, chain + (name,))
        state[name] = "done"
        order.append(services[name])

    for name in services:
        visit(name, ())
    return tuple(order)


def parse_compose(path: str | os.PathLike, variables: Mapping[str, str] | None = None) -> ComposeSpec:
    """Read a task's compose file (PyYAML); ComposeError naming the file and key for anything unsupported."""
    import yaml

    path = Path(path)
    env_dir = path.parent
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ComposeError(f"{path}: not valid YAML: {e}") from None
    raw = _interpolate(raw, {"CONTEXT_DIR": str(env_dir), **(variables or {})})
    top = _check_keys(raw, TOP_KEYS, "(top level)", path)
    if not isinstance(top.get("services"), dict) or not top["services"]:
        raise ComposeError(f"{path}: services = {top.get('services')!r}; expected a mapping of services")
    services = {str(n): _service(str(n), s, env_dir, path) for n, s in top["services"].items()}
    main = next((n for n in MAIN_NAMES if n in services), None)
    if main is None:
        if not (env_dir / "Dockerfile").is_file():
            raise ComposeError(f"{path}: no service named {' or '.join(MAIN_NAMES)} and no environment/Dockerfile "
                               "to build Harbor's main service from; expected one of them")
        services = {"main": Service("main", env_dir), **services}
        main = "main"
    return ComposeSpec(path, _start_order(services, path), main)


# ---------------------------------------------------------------------------------------------------- running


@dataclasses.dataclass(frozen=True)
class ComposeSnapshot:
    """A snapshot of every service's files (service name -> image snapshot id), forked as one."""

    spec: ComposeSpec
    snaps: tuple[tuple[str, str], ...]

    @property
    def main(self) -> str:
        """The main service's snapshot id."""
        return dict(self.snaps)[self.spec.main]


def wait_healthy(env, sid: str, hc: Healthcheck) -> None:
    """Run a healthcheck until it passes (Docker HEALTHCHECK rules); RuntimeError when it fails for good."""
    start, failures = time.monotonic(), 0
    while True:
        r = env.exec(sid, hc.command, timeout_s=hc.timeout_sec)
        if r["exit_code"] == 0:
            return
        if time.monotonic() - start < hc.start_period_sec:
            time.sleep(hc.start_interval_sec)
            continue
        failures += 1
        if failures >= hc.retries:
            raise RuntimeError(f"healthcheck {hc.command!r} failed {failures} times: "
                               f"{(r['stdout'] + r['stderr'])[-300:]}")
        time.sleep(hc.interval_sec)


def import_compose(env, spec: ComposeSpec, build: Callable[[Service], Any], workdir: str | None = None,
                   task_env: Mapping[str, str] | None = None) -> ComposeSnapshot:
    """Build (with `build(service) -> images.Image`) and import every service; the main service gets `workdir`
    and every service the task's [environment] env under its own `environment:`."""
    snaps = []
    for svc in spec.services:
        image = build(svc)
        is_main = svc.name == spec.main
        wd = svc.working_dir or (workdir if is_main else None)
        snaps.append((svc.name, env.import_image(image, workdir=wd, env={**(task_env or {}), **dict(svc.environment)},
                                                 command=svc.command)))
    return ComposeSnapshot(spec, tuple(snaps))


class ComposeGroup:
    """The running services of one multi-container trial (or episode); `main` is the agent's sandbox id."""

    def __init__(self, env, spec: ComposeSpec, net):
        self.env, self.spec, self.net = env, spec, net
        self.sids: dict[str, str] = {}

    @property
    def main(self) -> str:
        """The main service's sandbox id."""
        return self.sids[self.spec.main]

    def snapshot(self) -> ComposeSnapshot:
        """Every service's files, frozen (their processes restart, as at a container start)."""
        return ComposeSnapshot(self.spec, tuple((s.name, self.env.snapshot(self.sids[s.name]))
                                                for s in self.spec.services))

    def close(self, keep_main: bool = False) -> None:
        """Close every service's sandbox (but the main one with keep_main) and the network; idempotent."""
        for name, sid in list(self.sids.items()):
            if keep_main and name == self.spec.main:
                continue
            try:
                self.env.close(sid)
            except KeyError:
                pass
        self.net.close()


def fork_compose(env, snap: ComposeSnapshot, policy=None, resources=None) -> ComposeGroup:
    """Start every service from a ComposeSnapshot on a fresh private network, in depends_on order, waiting for
    the healthchecks service_healthy asks for. The main service gets `resources`; all get `policy`."""
    from composer2_jax.env.netns import SharedNet

    group = ComposeGroup(env, snap.spec, SharedNet(aliases=snap.spec.names()))
    snaps, healthy = dict(snap.snaps), set()
    try:
        for svc in snap.spec.services:
            for dep, cond in svc.depends_on:
                hc = snap.spec.service(dep).healthcheck
                if cond == "service_healthy" and dep not in healthy:
                    if hc is None:
                        raise RuntimeError(f"{snap.spec.path}: services.{svc.name} waits for {dep} to be healthy, "
                                           f"but {dep} has no healthcheck")
                    wait_healthy(env, group.sids[dep], hc)
                    healthy.add(dep)
            group.sids[svc.name] = env.fork(snaps[svc.name], policy=policy, net=group.net,
                                            resources=resources if svc.name == snap.spec.main else None)
    except Exception:
        group.close()
        raise
    return group
