"""SSRF guard: refuse URLs whose host resolves to a private, local or cloud-metadata address.

`checked_addresses` resolves a host once and refuses when ANY address is non-public, so a name with
one public and one private record is refused. The one connector (`services.net.connector`) calls it
(or `checked_addresses_now`, its blocking twin for git's worker thread) when it opens a connection and
connects to exactly the addresses it returned, so a DNS server that answers differently the second
time (DNS rebinding) gains nothing: there is no second time. `check_url_allowed` is the same check on
a URL, for early, friendly errors (job creation, binding a git source).

The blocked list leans on the stdlib `ipaddress` properties (loopback, private, link-local,
multicast, reserved, not global) plus what they miss: deprecated site-local IPv6 (`fec0::/10`), and
IPv4 addresses carried inside IPv6 (IPv4-mapped, 6to4, NAT64), which are judged by the IPv4 inside.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from services.core.errors import InvalidArgument, PermissionDenied

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

ALLOWED_SCHEMES = frozenset({"http", "https"})
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
#: what a refusal says, by purpose: (verb, the setting that allows private addresses for it)
PURPOSES = {"crawl": ("crawl", "ARCHIVIST_CRAWL_ALLOW_PRIVATE"), "git": ("fetch", "ARCHIVIST_GIT_ALLOW_PRIVATE")}


# Not covered by the `ipaddress` properties of every supported Python: documentation (RFC 9637).
EXTRA_NON_PUBLIC = (ipaddress.ip_network("3fff::/20"),)
NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: the last 32 bits are IPv4


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address delivers to: IPv4-mapped (::ffff:a.b.c.d), 6to4 (2002::/16), NAT64."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    embedded = address.ipv4_mapped or address.sixtofour
    if embedded is not None:
        return embedded
    if address in NAT64_PREFIX:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_class(address: IPAddress) -> str | None:
    """Name the reason `address` must not be crawled ("loopback", "private", ...), or None if public."""
    if address in METADATA_ADDRESSES:
        return "cloud metadata"
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        reason = address_class(embedded)
        return f"{reason} (IPv4 inside IPv6)" if reason else None
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    checks = (
        (address.is_loopback, "loopback"),
        (address.is_unspecified, "unspecified"),
        (address.is_link_local, "link-local"),
        (site_local, "site-local"),
        (address.is_multicast, "multicast"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
        (not address.is_global or any(address in net for net in EXTRA_NON_PUBLIC), "non-public"),
    )
    return next((name for matched, name in checks if matched), None)


def _parse_http_url(url: str) -> tuple[str, int]:
    """Return (host, port) of an http(s) URL, or raise InvalidArgument."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidArgument(f"invalid URL {url!r}: {exc}", "Give an absolute http(s) URL.") from exc
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise InvalidArgument(
            f"unsupported URL scheme {scheme or '(none)'!r} in {url!r}", "Only http:// and https:// URLs."
        )
    if not parts.hostname:
        raise InvalidArgument(f"URL has no host: {url!r}", "Give an absolute http(s) URL with a host name.")
    return parts.hostname, port or (443 if scheme == "https" else 80)


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _unique(infos: list[tuple[Any, ...]]) -> list[IPAddress]:
    addresses: dict[IPAddress, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        addresses.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), None)
    return list(addresses)


async def resolve_addresses(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (IPv4 and IPv6); InvalidArgument if it does not resolve.

    An IP literal is its own answer (no lookup, no thread).
    """
    literal = _literal(host)
    if literal is not None:
        return [literal]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise InvalidArgument(f"cannot resolve host {host!r}: {exc}", "Check the host name.") from exc
    return _unique(infos)


def resolve_addresses_now(host: str, port: int) -> list[IPAddress]:
    """`resolve_addresses`, blocking (for code already in a worker thread: git's smart-HTTP client)."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise InvalidArgument(f"cannot resolve host {host!r}: {exc}", "Check the host name.") from exc
    return _unique(infos)


def _refusal(target: str, host: str, reason: str, address: IPAddress, purpose: str) -> PermissionDenied:
    logger.info("refusing %s: %s resolves to %s address %s", target, host, reason, address)
    where = f"{host} is a {reason} address" if host == str(address) else f"{host} resolves to a {reason} address"
    verb, setting = PURPOSES[purpose]
    return PermissionDenied(
        f"refusing to {verb} {target}: {where} ({address})",
        f"Connecting to private, local and metadata addresses is disabled. If this host is trusted, "
        f"set {setting}=true.",
    )


def check_addresses(
    host: str, addresses: list[IPAddress], allow_private: bool, target: str | None = None, purpose: str = "crawl"
) -> list[IPAddress]:
    """`addresses` (what `host` resolved to), unless empty (InvalidArgument) or some address is
    non-public while `allow_private` is off (PermissionDenied naming `target`, default the host)."""
    if not addresses:
        raise InvalidArgument(f"cannot resolve host {host!r}: no addresses", "Check the host name.")
    if not allow_private:
        for address in addresses:
            reason = address_class(address)
            if reason:
                raise _refusal(target or host, host, reason, address, purpose)
    return addresses


async def checked_addresses(
    host: str,
    port: int,
    allow_private: bool,
    resolver: Resolver | None = None,
    *,
    target: str | None = None,
    purpose: str = "crawl",
) -> list[IPAddress]:
    """Resolve `host` once and return its addresses, raising unless every one may be connected to.

    `resolver` defaults to `resolve_addresses` (looked up at call time, so tests can replace it).
    InvalidArgument when the host does not resolve; PermissionDenied (naming `target`, default the
    host) when some address is non-public, unless `allow_private`.
    """
    addresses = await (resolver or resolve_addresses)(host, port)
    return check_addresses(host, addresses, allow_private, target, purpose)


def checked_addresses_now(host: str, port: int, allow_private: bool, purpose: str) -> list[IPAddress]:
    """`checked_addresses`, blocking: one look-up (`resolve_addresses_now`), the same check."""
    return check_addresses(host, resolve_addresses_now(host, port), allow_private, purpose=purpose)


async def check_url_allowed(url: str, allow_private: bool, purpose: str = "crawl") -> None:
    """Raise unless `url` is an http(s) URL whose host resolves only to public addresses.

    InvalidArgument: not http(s), no host, or the host does not resolve.
    PermissionDenied: some resolved address is private, loopback, link-local, site-local, reserved,
    multicast, unspecified or a cloud metadata address (IPv4 inside IPv6 included). `allow_private=True`
    skips the address checks (and the resolution); the scheme and host checks remain. Fetches do not
    rely on this: their connections are checked and pinned by `services.net.connector`.
    """
    host, port = _parse_http_url(url)
    if not allow_private:
        await checked_addresses(host, port, allow_private, target=url, purpose=purpose)
