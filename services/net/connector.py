"""HTTP clients that connect to the address that was checked: no DNS-rebinding gap.

A plain httpx client resolves the host name itself when it connects, so checking a URL first
(`check_url_allowed`) and fetching it second leaves a gap: a DNS server may answer a public address
to the check and 127.0.0.1 to the connection. Here the check IS the resolution. `PinnedBackend` is an
httpcore network backend: asked to `connect_tcp(host, port)` it resolves the host once
(`safety.checked_addresses`: every address must be public unless `allow_private`) and opens the TCP
connection to one of exactly those addresses. httpcore still knows the connection by its host name,
so the Host header, TLS SNI and certificate verification use the name, not the address.

Every connection of a `pinned_client` goes through it: the first request, each redirect hop the
caller follows, robots.txt, sitemaps, llms.txt and the browser's subresources. A kept-alive connection
is reused only for its own host and port, and it is connected to an address that was checked.
Proxies from the environment are ignored (a proxy would resolve the name itself), and retries are
off (a retry would resolve again).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from services.errors import InvalidArgument
from services.net import safety

logger = logging.getLogger(__name__)

SocketOption = tuple[int, int, int | bytes] | tuple[int, int, None, int]


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """A network backend whose `connect_tcp` resolves once, checks every address, connects to one of them."""

    def __init__(self, allow_private: bool, resolver: safety.Resolver | None = None) -> None:
        self._allow_private = allow_private
        self._resolver = resolver
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Connect to a checked address of `host`; PermissionDenied before any packet for a refused one.

        A name that does not resolve (or not within `timeout`) is a connection error, as in httpx.
        """
        try:
            async with asyncio.timeout(timeout):
                addresses = await safety.checked_addresses(host, port, self._allow_private, self._resolver)
        except InvalidArgument as exc:
            raise httpcore.ConnectError(exc.message) from exc
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
        error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                logger.debug("could not connect to %s (%s) port %d: %s", host, address, port, exc)
                error = exc
        assert error is not None  # checked_addresses never returns an empty list
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SocketOption] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not crawled")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """httpx's verifying context (certifi CAs), built once: loading the CA bundle takes tens of ms."""
    return httpx.create_ssl_context()


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (request/response mapping, streaming, errors) over a `PinnedBackend` pool.

    httpx does not take a network backend, so the connection pool it builds is replaced by an
    identical one (`httpcore.AsyncConnectionPool`, public API) that uses the pinned backend.
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolver: safety.Resolver | None = None,
        verify: ssl.SSLContext | bool = True,
        limits: httpx.Limits = httpx.Limits(max_connections=100, max_keepalive_connections=20),  # noqa: B008
    ) -> None:
        if isinstance(verify, ssl.SSLContext):
            context = verify
        else:
            context = default_ssl_context() if verify else httpx.create_ssl_context(verify=False)
        super().__init__(verify=context, limits=limits, retries=0)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            retries=0,
            network_backend=PinnedBackend(allow_private, resolver),
        )


def pinned_client(
    *, allow_private: bool, resolver: safety.Resolver | None = None, verify: ssl.SSLContext | bool = True, **kwargs: Any
) -> httpx.AsyncClient:
    """An httpx client whose every connection is checked and pinned; redirects are left to the caller.

    Callers follow redirects themselves (each hop is a new request, so a new check when it opens a
    connection) and catch `ServiceError` for refused or unresolvable hosts.
    """
    transport = PinnedTransport(allow_private=allow_private, resolver=resolver, verify=verify)
    return httpx.AsyncClient(transport=transport, trust_env=False, follow_redirects=False, **kwargs)
