"""SSRF guard: refuse URLs whose host resolves to a private, local or cloud-metadata address.

`checked_addresses` resolves a host once and refuses when ANY address is non-public, so a name with
one public and one private record is refused. The crawler's HTTP clients (`services.net.pinned_http`)
call it when they open a connection and connect to exactly the addresses it returned, so a DNS server
that answers differently the second time (DNS rebinding) gains nothing: there is no second time.
`check_url_allowed` is the same check on a URL, for early, friendly errors (job creation).

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
from urllib.parse import urlsplit

from services.errors import InvalidArgument, PermissionDenied

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

ALLOWED_SCHEMES = frozenset({"http", "https"})
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
_ALLOW_PRIVATE_HINT = (
    "Crawling private, local and metadata addresses is disabled. If this host is trusted, "
    "set ARCHIVIST_CRAWL_ALLOW_PRIVATE=true."
)


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


async def resolve_addresses(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (IPv4 and IPv6); InvalidArgument if it does not resolve.

    An IP literal is its own answer (no lookup, no thread).
    """
    try:
        return [ipaddress.ip_address(host.strip("[]").split("%", 1)[0])]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise InvalidArgument(f"cannot resolve host {host!r}: {exc}", "Check the host name.") from exc
    addresses: dict[IPAddress, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        addresses.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), None)
    return list(addresses)


def _refusal(target: str, host: str, reason: str, address: IPAddress) -> PermissionDenied:
    logger.info("refusing %s: %s resolves to %s address %s", target, host, reason, address)
    where = f"{host} is a {reason} address" if host == str(address) else f"{host} resolves to a {reason} address"
    return PermissionDenied(f"refusing to crawl {target}: {where} ({address})", _ALLOW_PRIVATE_HINT)


async def checked_addresses(
    host: str, port: int, allow_private: bool, resolver: Resolver | None = None, *, target: str | None = None
) -> list[IPAddress]:
    """Resolve `host` once and return its addresses, raising unless every one may be crawled.

    `resolver` defaults to `resolve_addresses` (looked up at call time, so tests can replace it).
    InvalidArgument when the host does not resolve; PermissionDenied (naming `target`, default the
    host) when some address is non-public, unless `allow_private`.
    """
    addresses = await (resolver or resolve_addresses)(host, port)
    if not addresses:
        raise InvalidArgument(f"cannot resolve host {host!r}: no addresses", "Check the host name.")
    if not allow_private:
        for address in addresses:
            reason = address_class(address)
            if reason:
                raise _refusal(target or host, host, reason, address)
    return addresses


async def check_url_allowed(url: str, allow_private: bool) -> None:
    """Raise unless `url` is an http(s) URL whose host resolves only to public addresses.

    InvalidArgument: not http(s), no host, or the host does not resolve.
    PermissionDenied: some resolved address is private, loopback, link-local, site-local, reserved,
    multicast, unspecified or a cloud metadata address (IPv4 inside IPv6 included). `allow_private=True`
    skips the address checks (and the resolution); the scheme and host checks remain. Fetches do not
    rely on this: their connections are checked and pinned by `services.net.pinned_http`.
    """
    host, port = _parse_http_url(url)
    if not allow_private:
        await checked_addresses(host, port, allow_private, target=url)
