"""The one connector: every outbound connection to a host a caller chose connects to the address
that was checked, with no DNS-rebinding gap.

A plain HTTP client resolves the host name itself when it connects, so checking a URL first
(`check_url_allowed`) and fetching it second leaves a gap: a DNS server may answer a public address
to the check and 127.0.0.1 to the connection. Here the check IS the resolution: asked to connect to
(host, port), the connector resolves the host once (`safety.checked_addresses`: every address must
be public unless private addresses are allowed) and opens the TCP connection to one of exactly those
addresses. The HTTP layer still knows the connection by its host name, so the Host header, TLS SNI
and certificate verification use the name, not the address.

It has two faces over the same check, one per HTTP library the project fetches with:
- `pinned_client`: an httpx client (an httpcore network backend, `PinnedBackend`) for pages, each
  redirect hop the caller follows, robots.txt, sitemaps, llms.txt, documents and specs by URL and the
  browser's subresources;
- `PinnedPoolManager`: a urllib3 pool manager whose connections (`_new_conn`) do the same, for
  dulwich's git smart-HTTP client, every redirect hop and retry included.
A kept-alive connection is reused only for its own host and port, and it is connected to an address
that was checked. Proxies from the environment are ignored (a proxy would resolve the name itself).
No other module opens an outbound connection to a caller-chosen host (tests/security/test_outbound.py);
endpoints the operator configures (SearXNG, the identity provider) keep their own clients.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
import sys
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx
import urllib3
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection

from services.core.errors import InvalidArgument, PermissionDenied
from services.net import safety

logger = logging.getLogger(__name__)

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]  # httpcore's


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


# --- the urllib3 face (git smart HTTP, in a worker thread) ------------------------------------------


#: what a failed urllib3 exchange raises (dulwich wraps most of these in GitProtocolError)
CONNECTION_ERRORS: tuple[type[Exception], ...] = (urllib3.exceptions.HTTPError, OSError)


def urllib3_timeout(seconds: float) -> urllib3.Timeout:
    """Each connect (at most 15 s) and each read may wait `seconds`."""
    return urllib3.Timeout(connect=min(seconds, 15.0), read=seconds)


class PinnedHTTPConnection(urllib3.connection.HTTPConnection):
    """A urllib3 connection that resolves its host once, checks every address and connects to one of
    them. `allow_private` and `purpose` are set on the subclass `PinnedPoolManager` makes."""

    allow_private = False
    purpose = "git"

    def _new_conn(self) -> socket.socket:
        try:
            addresses = safety.checked_addresses_now(self._dns_host, self.port, self.allow_private, self.purpose)
        except InvalidArgument as exc:
            raise NameResolutionError(self.host, self, socket.gaierror(exc.message)) from None
        error: Exception | None = None
        for address in addresses:
            try:
                sock = connection.create_connection(
                    (str(address), self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as exc:
                error = ConnectTimeoutError(self, f"Connection to {self.host} timed out ({self.timeout})")
                error.__cause__ = exc
            except OSError as exc:
                error = NewConnectionError(self, f"Failed to establish a new connection: {exc}")
            else:
                sys.audit("http.client.connect", self, self.host, self.port)
                return sock
        assert error is not None  # checked_addresses_now never returns an empty list
        raise error


class PinnedHTTPSConnection(PinnedHTTPConnection, urllib3.connection.HTTPSConnection):
    """TLS over a pinned connection: `connect` wraps the socket from `_new_conn` with the host NAME
    as SNI and for certificate verification."""


class PinnedPoolManager(urllib3.PoolManager):
    """A urllib3 pool manager whose every connection is pinned (`PinnedHTTPConnection`), redirects
    and retries included (each opens its connection through the same check); only http(s) URLs."""

    def __init__(self, *, allow_private: bool, purpose: str = "git", **kwargs: Any) -> None:
        kwargs.setdefault("retries", urllib3.Retry(total=3, connect=2, read=0, redirect=5))
        super().__init__(**kwargs)
        policy = {"allow_private": allow_private, "purpose": purpose}
        plain = type("PinnedHTTP", (PinnedHTTPConnection,), policy)
        tls = type("PinnedHTTPS", (PinnedHTTPSConnection,), policy)
        self.pool_classes_by_scheme = {
            "http": type("PinnedHTTPPool", (urllib3.HTTPConnectionPool,), {"ConnectionCls": plain}),
            "https": type("PinnedHTTPSPool", (urllib3.HTTPSConnectionPool,), {"ConnectionCls": tls}),
        }

    def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
        scheme = url.partition("://")[0].lower() if "://" in url else ""
        if scheme not in safety.ALLOWED_SCHEMES:
            raise PermissionDenied(f"refusing to fetch {url[:200]}: only http(s) URLs", "Use an http(s) URL.")
        return super().urlopen(method, url, redirect=redirect, **kw)
