"""Headers and cookies for documentation behind a login, given as references to environment variables.

A crawl may carry `headers={"Authorization": "env:DOCS_TOKEN"}` and `cookies={"session": "env:DOCS_COOKIE"}`.
Only the references are stored (in the job's parameters, so a recrawl reuses them) and shown; the
values are read through the secret gate (services/access/secret_gate.py: which variables this caller
may have sent) when the job is queued (to name a missing variable at once) and again when a worker
starts it, and live only in a `SiteCredentials` held by that job's fetchers. A literal value is
refused without being echoed.

`SiteCredentials.for_url(url)` is asked on every request, each redirect hop included: the headers go
only to the start URL's host and port (and the hosts listed in `auth_hosts`), never over plain http
when the crawl started on https, so a redirect to another host, or a robots.txt or sitemap of
another host, gets none of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from services.access.secret_gate import check_variable, secret_value
from services.core.errors import InvalidArgument

ENV_REFERENCE = re.compile(r"env:([A-Z_][A-Z0-9_]{0,127})")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
COOKIE_NAME = HEADER_NAME
HOST_ENTRY = re.compile(r"[a-z0-9.-]{1,253}(?::[0-9]{1,5})?|\[[0-9a-f:.]{2,45}\](?::[0-9]{1,5})?")
#: Headers the crawler owns (or that would split a request): not settable. Cookies go in `cookies`.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "cookie"}
)
MAX_ENTRIES = 10
HEADER_FORBIDDEN = "\r\n\0"
COOKIE_FORBIDDEN = ";\r\n\0"
DEFAULT_PORTS = {"http": 80, "https": 443}
REFERENCE_HINT = (
    "Put the secret in an environment variable of the server and pass its name, "
    "e.g. headers={'Authorization': 'env:DOCS_TOKEN'} with DOCS_TOKEN='Bearer ...'."
)


def _references(value: object, argument: str, name_pattern: re.Pattern[str]) -> dict[str, str]:
    """{name: "env:VAR"} checked; a literal value is refused without being repeated."""
    if value is None or value == {}:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{argument} must be an object of names to 'env:NAME' references.", REFERENCE_HINT)
    if len(value) > MAX_ENTRIES:
        raise InvalidArgument(f"{argument} has {len(value)} entries (at most {MAX_ENTRIES}).", "Pass fewer.")
    checked: dict[str, str] = {}
    for name, reference in value.items():
        if not isinstance(name, str) or not name_pattern.fullmatch(name):
            raise InvalidArgument(f"A name in {argument} is not a valid name (not shown).", REFERENCE_HINT)
        if argument == "headers" and name.lower() in RESERVED_HEADERS:
            raise InvalidArgument(f"headers may not set {name}.", "Pass cookies in cookies={'name': 'env:NAME'}.")
        if not isinstance(reference, str) or not ENV_REFERENCE.fullmatch(reference.strip()):
            raise InvalidArgument(
                f"{argument}['{name}'] must be a reference to an environment variable of the server, "
                "'env:NAME' with NAME in upper case; a literal value is refused (the value given is not shown).",
                REFERENCE_HINT,
            )
        check_variable(reference.strip().removeprefix("env:"), f"{argument}['{name}']")
        checked[name] = reference.strip()
    return checked


def _hosts(value: object) -> list[str]:
    if not value:
        return []
    if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
        raise InvalidArgument("auth_hosts must be a list of host names.", "Pass auth_hosts=['api.example.com'].")
    hosts = list(dict.fromkeys(h.strip().lower().rstrip(".") for h in value if h.strip()))
    if len(hosts) > MAX_ENTRIES or not all(HOST_ENTRY.fullmatch(h) for h in hosts):
        raise InvalidArgument(
            f"auth_hosts must be at most {MAX_ENTRIES} host names (host or host:port).",
            "Pass auth_hosts=['api.example.com', 'docs.example.com:8443'].",
        )
    return hosts


def check_references(
    headers: object, cookies: object, auth_hosts: object
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The checked (headers, cookies, auth_hosts) of a crawl: references only, never values."""
    return (
        _references(headers, "headers", HEADER_NAME),
        _references(cookies, "cookies", COOKIE_NAME),
        _hosts(auth_hosts),
    )


def variable_names(references: Mapping[str, str]) -> dict[str, str]:
    """{name: VARIABLE} for showing (manage_source get, the console)."""
    return {name: reference.removeprefix("env:") for name, reference in references.items()}


def _read(reference: str, argument: str, name: str, forbidden: str) -> str:
    variable = reference.removeprefix("env:")
    value = secret_value(variable, f"{argument}['{name}']")
    if any(c in value for c in forbidden) or not value.isprintable() or not value.isascii():
        raise InvalidArgument(
            f"The environment variable {variable} ({argument}['{name}']) holds a value that cannot be sent "
            "(line breaks, control or non-ASCII characters; not shown).",
            f"Fix the value of {variable} on the server.",
        )
    return value


def same_host(url: str, other: str) -> bool:
    """Whether two URLs name the same scheme, host and port (a recrawl moved elsewhere drops its login)."""
    first, second = _host_of(url), _host_of(other)
    return first is not None and first == second


def _port_key(scheme: str, port: int | None) -> int | None:
    """None for the scheme's default port (http and https defaults match each other: an upgrade keeps them)."""
    return None if port is None or port == DEFAULT_PORTS.get(scheme) else port


def _host_of(url: str) -> tuple[str, int | None, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return parts.hostname.lower().rstrip("."), _port_key(scheme, port), scheme


@dataclass(frozen=True)
class SiteCredentials:
    """Resolved headers of one crawl job and the hosts they may go to. Never logged (repr hides values)."""

    hosts: frozenset[tuple[str, int | None]]
    secure_only: bool  # the crawl started on https: never send over plain http
    headers: Mapping[str, str] = field(repr=False)

    def for_url(self, url: str) -> dict[str, str]:
        """The headers to send with a request to `url` (each redirect hop asks again): {} off the hosts."""
        host = _host_of(url)
        if host is None or (host[0], host[1]) not in self.hosts:
            return {}
        if self.secure_only and host[2] != "https":
            return {}
        return dict(self.headers)


def resolve(
    start_url: str, headers: Mapping[str, str], cookies: Mapping[str, str], auth_hosts: list[str]
) -> SiteCredentials | None:
    """Read the referenced variables (InvalidArgument naming a missing one); None without references."""
    if not headers and not cookies:
        return None
    values = {name: _read(ref, "headers", name, HEADER_FORBIDDEN) for name, ref in headers.items()}
    if cookies:
        values["Cookie"] = "; ".join(
            f"{name}={_read(ref, 'cookies', name, COOKIE_FORBIDDEN)}" for name, ref in cookies.items()
        )
    start = _host_of(start_url)
    if start is None:
        raise InvalidArgument("The crawl URL has no host.", "Pass an absolute http(s) URL.")
    hosts = {(start[0], start[1])}
    for entry in auth_hosts:
        parsed = _host_of(f"{start[2]}://{entry}")
        if parsed is not None:
            hosts.add((parsed[0], parsed[1]))
    return SiteCredentials(frozenset(hosts), secure_only=start[2] == "https", headers=values)
