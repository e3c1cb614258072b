"""SSRF guard: refuse URLs whose host resolves to a private, local or cloud-metadata address.

The check resolves the host itself and refuses when ANY address is non-public, so a name with one
public and one private record is refused. It runs before every request and every redirect hop; the
HTTP client resolves the name again when it connects, so a DNS server that answers differently the
second time (DNS rebinding) is not covered by this check alone.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from urllib.parse import urlsplit

from services.errors import InvalidArgument, PermissionDenied

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = frozenset({"http", "https"})
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
_ALLOW_PRIVATE_HINT = (
    "Crawling private, local and metadata addresses is disabled. If this host is trusted, "
    "set ARCHIVIST_CRAWL_ALLOW_PRIVATE=true."
)


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d) or 6to4 (2002::/16) IPv6 address."""
    if isinstance(address, ipaddress.IPv6Address):
        return address.ipv4_mapped or address.sixtofour
    return None


def address_class(address: IPAddress) -> str | None:
    """Name the reason `address` must not be crawled ("loopback", "private", ...), or None if public."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        reason = address_class(embedded)
        return f"{reason} (IPv4 inside IPv6)" if reason else None
    checks = (
        (address in METADATA_ADDRESSES, "cloud metadata"),
        (address.is_loopback, "loopback"),
        (address.is_unspecified, "unspecified"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
        (not address.is_global, "non-public"),
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
    """Every address `host` resolves to (IPv4 and IPv6); InvalidArgument if it does not resolve."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise InvalidArgument(f"cannot resolve host {host!r}: {exc}", "Check the host name.") from exc
    addresses: dict[IPAddress, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        addresses.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), None)
    return list(addresses)


async def check_url_allowed(url: str, allow_private: bool) -> None:
    """Raise unless `url` is an http(s) URL whose host resolves only to public addresses.

    InvalidArgument: not http(s), no host, or the host does not resolve.
    PermissionDenied: some resolved address is private, loopback, link-local, reserved, multicast,
    unspecified or a cloud metadata address (IPv4-mapped IPv6 included). `allow_private=True` skips the
    address checks (and the resolution); the scheme and host checks remain.
    """
    host, port = _parse_http_url(url)
    if allow_private:
        return
    for address in await resolve_addresses(host, port):
        reason = address_class(address)
        if reason:
            logger.info("refusing %s: %s resolves to %s address %s", url, host, reason, address)
            raise PermissionDenied(
                f"refusing to crawl {url}: {host} resolves to a {reason} address ({address})",
                _ALLOW_PRIVATE_HINT,
            )
