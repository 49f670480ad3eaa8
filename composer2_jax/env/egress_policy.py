"""Egress policy (which hosts, ports and methods a sandbox may reach) and the per-sandbox request log."""

from __future__ import annotations

import dataclasses
import fnmatch
import ipaddress
import socket
import threading
import time

DEFAULT_METHODS = ("GET", "HEAD", "OPTIONS", "CONNECT")
# Addresses a sandbox must never reach unless `allow_private`: the host itself, its LAN and cloud metadata. These are
# the IANA special-purpose ranges that name *internal* hosts (RFC 6890: loopback, RFC 1918, shared CGNAT space,
# link-local, unique-local, multicast, "this network", reserved). The documentation and benchmarking ranges
# (192.0.2/24, 198.51.100/24, 203.0.113/24, 198.18/15) are deliberately not here: transparent egress proxies answer
# public names from them (on the machines this runs on, every public name resolves to 203.0.113.80).
INTERNAL_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16",
    "224.0.0.0/4", "240.0.0.0/4", "::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8"))


def is_internal(address: str) -> bool:
    """True if an IP address names the host, its LAN, link-local services or is not routable (see INTERNAL_NETWORKS)."""
    addr = ipaddress.ip_address(address)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr in net for net in INTERNAL_NETWORKS if net.version == addr.version)


@dataclasses.dataclass(frozen=True)
class EgressPolicy:
    """Deny by default: a request passes only if its method, port and host are all allowed."""

    allow_hosts: tuple[str, ...] = ()  # host patterns, shell-style and case-insensitive: "pypi.org", "*.github.com"
    allow_ports: tuple[int, ...] = (80, 443)  # destination ports
    allow_methods: tuple[str, ...] = DEFAULT_METHODS  # HTTP methods (CONNECT opens a TLS tunnel, not inspected)
    # allow hosts that resolve to internal addresses (INTERNAL_NETWORKS: loopback, LAN, ...)
    allow_private: bool = False

    def __post_init__(self):
        for port in self.allow_ports:
            if not isinstance(port, int) or not 0 < port < 65536:
                raise ValueError(f"EgressPolicy.allow_ports has {port!r}; expected ports 1..65535")
        for name in ("allow_hosts", "allow_methods"):
            for item in getattr(self, name):
                if not isinstance(item, str) or not item:
                    raise ValueError(f"EgressPolicy.{name} has {item!r}; expected non-empty strings")

    def decide(self, method: str, host: str, port: int) -> tuple[bool, str]:
        """(allowed, reason) from the method, port and host name alone (no DNS)."""
        if method.upper() not in {m.upper() for m in self.allow_methods}:
            return False, f"method {method} is not allowed (allowed: {', '.join(self.allow_methods)})"
        if port not in self.allow_ports:
            return False, f"port {port} is not allowed (allowed: {', '.join(map(str, self.allow_ports))})"
        host = host.lower().rstrip(".")
        if not any(fnmatch.fnmatchcase(host, p.lower()) for p in self.allow_hosts):
            return False, f"host {host} is not in the allow list"
        return True, "allowed by policy"

    def resolve(self, host: str, port: int) -> tuple[str | None, str]:
        """(address to connect to, reason): resolve once and pin, refusing private addresses unless allowed."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            return None, f"cannot resolve {host}: {e}"
        for family, _, _, _, sockaddr in infos:
            if not self.allow_private and is_internal(sockaddr[0]):
                return None, f"host {host} resolves to non-public address {sockaddr[0]}"
        return infos[0][4][0], "allowed by policy"

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> EgressPolicy:
        """Inverse of to_dict (lists become tuples)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown EgressPolicy fields {sorted(unknown)}; expected some of {sorted(known)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


@dataclasses.dataclass
class EgressEvent:
    """One outbound request as the proxy saw it; counters fill in while it runs."""

    seq: int
    time: float
    method: str
    host: str
    port: int
    target: str
    allowed: bool
    reason: str
    status: int | None = None
    bytes_up: int = 0
    bytes_down: int = 0
    phase: str = ""  # the sandbox's phase when the request came ("agent", "verifier"; "" before any was set)

    def summary(self) -> str:
        """One line for the model's context."""
        verdict = "ALLOWED" if self.allowed else "DENIED"
        tail = f" -> {self.status}" if self.status is not None else ""
        return f"{verdict} {self.method} {self.target}{tail} ({self.reason})"

    def to_dict(self) -> dict:
        """JSON-ready form, with the summary line."""
        return {**dataclasses.asdict(self), "summary": self.summary()}


class EgressLog:
    """Thread-safe, append-only list of one sandbox's egress events."""

    def __init__(self):
        self._events: list[EgressEvent] = []
        self._lock = threading.Lock()
        self.phase = ""  # stamped on every event added (EgressProxy.set_phase sets it)

    def add(self, method: str, host: str, port: int, target: str, allowed: bool, reason: str) -> EgressEvent:
        """Record a request decision and return the event (the proxy updates its counters)."""
        with self._lock:
            event = EgressEvent(len(self._events), time.time(), method, host, port, target, allowed, reason,
                                phase=self.phase)
            self._events.append(event)
        return event

    def __len__(self) -> int:
        """Events logged so far."""
        with self._lock:
            return len(self._events)

    def events(self, since: int = 0) -> list[dict]:
        """Events with seq >= since, as dicts."""
        with self._lock:
            return [e.to_dict() for e in self._events[since:]]
