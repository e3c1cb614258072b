"""Which names this server answers to: the Host allow-list of the whole HTTP app (console, /mcp,
/healthz) and the Origin check of the console's forms, from one list.

A DNS-rebinding page makes the browser send the attacker's own name as Host and Origin; answering
only to the names below (loopback names, the bind address, ARCHIVIST_ALLOWED_HOSTS) refuses it."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARD_BINDS = ("0.0.0.0", "[::]", "")
DEFAULT_PORTS = {"http": 80, "https": 443}


def host_name(host: str) -> str:
    """A host as it appears in a Host header: lower case, IPv6 literals in brackets, no port."""
    host = host.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    if host.count(":") == 1:
        host = host.split(":", 1)[0]  # name:port
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]"
    except ValueError:
        pass
    return host


def is_loopback(host: str) -> bool:
    name = host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class HostPolicy:
    """`local`: loopback names and the bind address (any port); `public`: ARCHIVIST_ALLOWED_HOSTS."""

    local: frozenset[str]
    public: frozenset[str]

    @classmethod
    def for_server(cls, bind_host: str, public: Iterable[str] = ()) -> HostPolicy:
        local = set(LOOPBACK_NAMES)
        if host_name(bind_host) not in WILDCARD_BINDS:
            local.add(host_name(bind_host))
        names = {host_name(p) for p in public if p.strip() and "*" not in p}  # exact names only
        return cls(local=frozenset(local), public=frozenset(names - local))

    @property
    def names(self) -> list[str]:
        """Every allowed name (the patterns of Starlette's TrustedHostMiddleware)."""
        return sorted(self.local | self.public)

    def allows_host(self, host: str) -> bool:
        return host_name(host) in self.local | self.public

    def allows_origin(self, origin: str | None, request_host: str, request_scheme: str) -> bool:
        """Whether a browser's Origin header names this server: an allowed name, and for loopback or
        bind names also this request's own port (another local app on another port is another site).
        A public name may differ in scheme and port (a TLS reverse proxy in front)."""
        if not origin:
            return True
        if origin == "null":
            return False
        try:
            parts = urlsplit(origin)
            port = parts.port or DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            return False
        name = host_name(parts.hostname)
        if name in self.public:
            return True
        if name not in self.local:
            return False
        return port == request_port(request_host, request_scheme)


def request_port(host_header: str, scheme: str) -> int | None:
    """The port a Host header names (the scheme's default when it names none)."""
    tail = host_header.rsplit("]", 1)[-1]
    if ":" in tail:
        try:
            return int(tail.rsplit(":", 1)[1])
        except ValueError:
            return None
    return DEFAULT_PORTS.get(scheme)
