"""Whether an HTTP request without credentials is served as the local owner ("open"): the one predicate
every HTTP door asks (/mcp with the resources, MCP apps and skills behind it, the console, the details
of /healthz). Stdio is the owner's by construction and never asks.

Open is a state someone chose, never a consequence (issue 38). It used to follow from "bound to loopback
and no active token", re-read on every request, so behind a reverse proxy on 127.0.0.1 the server opened
to everyone the moment its last token expired or was revoked. Now a request is open only when all hold:

- the server binds loopback, and no setting says people reach it from elsewhere: not
  ARCHIVIST_ALLOWED_HOSTS, not ARCHIVIST_CONSOLE_REQUIRE_SIGN_IN, not an identity provider;
- the request names a loopback Host and carries no header a proxy adds (Forwarded, X-Forwarded-*,
  X-Real-IP, Via);
- the operator chose it (ARCHIVIST_SINGLE_USER), or this knowledge base has never had an access token
  nor an identity provider: `access_state` (sql/033), set by the first token or grant in the same
  transaction and never cleared, so revoking or expiring tokens cannot reopen it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import asyncpg

from services.access.hosts import is_loopback
from services.access.tokens import TOKENS_EVER_MADE_SQL
from services.core.settings import Settings

logger = logging.getLogger(__name__)
#: how a door reaches the database: the pool, opened on first use (the HTTP token checks' own, or the app's)
PoolSource = Callable[[], Awaitable[asyncpg.Pool]]
#: headers a reverse proxy adds (besides every X-Forwarded-*): a request carrying one was relayed
RELAY_HEADERS = frozenset({"forwarded", "via", "x-real-ip"})
SECURED_SQL = "SELECT EXISTS (SELECT 1 FROM access_state)"


def relayed(header_names: Iterable[str]) -> bool:
    """Whether a request's headers show a proxy relayed it."""
    return any(n.lower() in RELAY_HEADERS or n.lower().startswith("x-forwarded-") for n in header_names)


@dataclass(frozen=True)
class OpenPolicy:
    """What the server's settings and bind decide before any request: `closed_by` names why it is never
    open (None: it may be); `chosen` says the operator opened loopback on purpose (ARCHIVIST_SINGLE_USER)."""

    loopback: bool
    closed_by: str | None
    chosen: bool

    @classmethod
    def for_server(cls, settings: Settings, bind_host: str) -> OpenPolicy:
        loopback = is_loopback(bind_host)
        reasons = [
            (not loopback, f"the server binds {bind_host or 'every interface'}, not loopback"),
            (bool(settings.oauth_issuer), "ARCHIVIST_OAUTH_ISSUER is set"),
            (bool(settings.allowed_hosts), "ARCHIVIST_ALLOWED_HOSTS is set"),
            (bool(settings.console_require_sign_in), "ARCHIVIST_CONSOLE_REQUIRE_SIGN_IN is set"),
        ]
        closed_by = next((why for hit, why in reasons if hit), None)
        return cls(loopback=loopback, closed_by=closed_by, chosen=bool(settings.single_user))

    def refuses(self, host_header: str, header_names: Iterable[str]) -> bool:
        """Whether this request is closed whatever the database says."""
        return self.closed_by is not None or not is_loopback(host_header) or relayed(header_names)


class SecuredFlag:
    """Whether this knowledge base was ever secured (sql/033). A latch: once seen set it is never asked
    again (nothing clears it). Until then each request waits for the next query, one that starts after
    it arrived (a token made by another process counts from the next request on), and all requests that
    arrived meanwhile share its answer: one query at a time, whatever the concurrency."""

    def __init__(self, pool: PoolSource) -> None:
        self.pool = pool
        #: the last successful answer; secured (closed) until one succeeds: a failing first check never opens
        self.last: bool = True
        self.known = False  # whether any check has succeeded
        self._next: asyncio.Future[bool] | None = None
        self._checking = False

    async def secured(self) -> bool:
        if self.known and self.last:
            return True
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            if not self._checking:
                asyncio.get_running_loop().create_task(self._run_checks())
        return await asyncio.shield(self._next)

    async def _run_checks(self) -> None:
        self._checking = True
        try:
            while self._next is not None:
                waiters, self._next = self._next, None  # everyone waiting arrived before this query starts
                waiters.set_result(await self._check())
        finally:
            self._checking = False

    async def _check(self) -> bool:
        try:
            self.last, self.known = await ever_secured(await self.pool()), True
        except Exception:
            # Database unreachable: keep the last successful answer (a never-secured server stays open,
            # so its calls answer UNAVAILABLE in the JSON contract; before any answer it is closed)
            logger.warning("access state check failed; keeping the last answer (secured=%s)", self.last, exc_info=True)
        return self.last


async def ever_secured(conn: asyncpg.Pool | asyncpg.Connection) -> bool:
    """Whether a token or an identity provider was ever set up here (False before any migration)."""
    # before sql/033 is applied (a server still migrating), any token row, revoked or not, counts
    for sql in (SECURED_SQL, TOKENS_EVER_MADE_SQL):
        try:
            return bool(await conn.fetchval(sql))
        except asyncpg.UndefinedTableError:
            continue
    return False


async def remember_secured(conn: asyncpg.Pool | asyncpg.Connection, by: str) -> None:
    """Set the flag (tokens and grants set it by trigger; a server started with an issuer calls this)."""
    await conn.execute("INSERT INTO access_state (secured_by) VALUES ($1) ON CONFLICT (only_row) DO NOTHING", by)


class OpenDoor:
    """The predicate of one HTTP server: its policy and the database flag."""

    def __init__(self, settings: Settings, bind_host: str, pool: PoolSource) -> None:
        self.policy = OpenPolicy.for_server(settings, bind_host)
        self.flag = SecuredFlag(pool)

    async def admits(self, host_header: str, header_names: Iterable[str]) -> bool:
        """Whether this request, without credentials, is served as the local owner."""
        if self.policy.refuses(host_header, header_names):
            return False
        return self.policy.chosen or not await self.flag.secured()


@dataclass(frozen=True)
class AccessMode:
    """What `doctor` and `token revoke` say of an HTTP server bound to `ARCHIVIST_HTTP_HOST`."""

    open: bool
    text: str


async def access_mode(settings: Settings, conn: asyncpg.Pool | asyncpg.Connection, active_tokens: bool) -> AccessMode:
    policy = OpenPolicy.for_server(settings, settings.http_host)
    create = "create one with: archivist token create --name NAME"
    if policy.closed_by is not None:
        if active_tokens:
            return AccessMode(False, f"closed: {policy.closed_by}, so every HTTP caller needs a token")
        return AccessMode(
            False, f"closed: {policy.closed_by}, and no token is active, so HTTP callers are refused; {create}"
        )
    if policy.chosen:
        return AccessMode(
            True, "open on loopback by choice (ARCHIVIST_SINGLE_USER): HTTP callers without a token are the local owner"
        )
    if not await ever_secured(conn):
        return AccessMode(
            True,
            "open on loopback: no token or identity provider has ever existed here, so HTTP callers without a "
            "token are the local owner; the first token closes it for good",
        )
    if active_tokens:
        return AccessMode(False, "closed: every HTTP caller needs a token")
    return AccessMode(
        False,
        f"closed: no token is active, so every HTTP request is refused (401); {create}. Revoked or expired "
        "tokens never reopen the server (ARCHIVIST_SINGLE_USER=true opens loopback on purpose)",
    )
