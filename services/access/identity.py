"""Identity once, at the edge: who is calling (`Caller`, built by the transport from a verified token
or the server's own `--profile` selection), what it may reach (`scope_of`, and `rate_bucket` for one call
from its bucket) and one audit record per call (`record`). services/access/gate.py builds callers
from tokens and admits them (`admitted`) for MCP requests (access/guard.py) and console pages; nothing
else decides identity.

Rate buckets: a token has its own (its override, else ARCHIVIST_RATE_PER_MINUTE), and so has a person
or agent of the identity provider (keyed by issuer and subject, never by a name it chose). The local owner
(no token: stdio, open loopback HTTP) is not throttled by default: its agents are its own work. With
ARCHIVIST_LOCAL_RATE_PER_MINUTE > 0, each MCP session of the owner gets a bucket of that size (a stdio
process; an HTTP session; for the session-less 2026-07-28 protocol, the client's connection).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from services.access.oauth import Identity
from services.access.scope import Scope
from services.core.errors import PermissionDenied

if TYPE_CHECKING:
    from services.access.audit import AuditService
    from services.access.grants import GrantService
    from services.access.profiles import ProfileService
    from services.access.ratelimit import RateLimiter
    from services.core.settings import Settings

logger = logging.getLogger(__name__)
#: the transport of an HTTP request with no verified credentials that the open-state predicate
#: (services/access/open_state.py) did not admit: refused on every call
UNVERIFIED = "unverified"
#: a console page open to anyone (sign-in) before its visitor signs in: sees no source, changes nothing
NOBODY = "nobody"


class AccessApp(Protocol):
    """What identity needs of the services (services.app.Archivist has them)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def profiles(self) -> ProfileService: ...
    @property
    def grants(self) -> GrantService: ...
    @property
    def ratelimit(self) -> RateLimiter: ...
    @property
    def audit(self) -> AuditService: ...


@dataclass(frozen=True)
class Caller:
    """One request's caller as the transport saw it."""

    #: the verified token's name; None = no token (the local owner, confined by `profiles` if any)
    token: str | None = None
    #: the token's profiles, else the server's `--profile` / ARCHIVIST_PROFILES selection
    profiles: tuple[str, ...] = ()
    read_only: bool = False
    rate_per_minute: int | None = None  # the token's override
    max_running_jobs: int | None = None  # the token's override
    #: the owner's name in the audit log: "stdio" or "local" (loopback HTTP without a token)
    transport: str = "stdio"
    #: the owner's MCP session (HTTP session id, else the client connection), for its own rate bucket
    session: str | None = None
    #: a token of the team's identity provider (services/access/oauth.py): its grants decide the scope
    identity: Identity | None = None

    @property
    def local_owner(self) -> bool:
        """No token and no profiles: stdio, or loopback HTTP open because no token exists."""
        anonymous = self.token is None and self.identity is None and not self.profiles
        return anonymous and self.transport not in (UNVERIFIED, NOBODY)

    @property
    def who(self) -> str:
        if self.identity is not None:
            return self.identity.label
        return self.token or self.transport


async def scope_of(app: AccessApp, caller: Caller) -> Scope:
    """The caller's scope: its profiles' sources (none named = every source), read-only if either
    the token or a profile says so. Unknown or disabled profiles refuse the call (NotFound).
    An identity-provider token reaches the profiles its grants name, and nothing without one."""
    if caller.identity is not None:
        return await identity_scope(app, caller, caller.identity)
    if caller.token is None and caller.transport == NOBODY:
        return nobody()
    if caller.token is None and caller.transport == UNVERIFIED:
        raise PermissionDenied(
            "This request carries no verified access token, and this server is not open to callers without one.",
            "Send Authorization: Bearer <token>; create one on the server with: archivist token create --name NAME",
        )
    if caller.local_owner:
        return Scope.owner(caller.who)
    scope = await app.profiles.scope_for(list(caller.profiles), read_only=caller.read_only, who=caller.who)
    if caller.max_running_jobs is not None:
        scope = dataclasses.replace(scope, max_running_jobs=caller.max_running_jobs)
    return scope


def nobody() -> Scope:
    """The scope of a caller not yet known (a console sign-in page): no source, read-only."""
    return Scope(who="nobody")


async def identity_scope(app: AccessApp, caller: Caller, identity: Identity) -> Scope:
    """The profiles an identity's grants reach (services/access/grants.py); writable with the
    `archivist:write` scope or a `--write` grant. No grant: PERMISSION_DENIED saying why, on every call."""
    reach = await app.grants.reach(identity)
    if not reach.profiles:
        raise PermissionDenied(
            f"Signed in as {identity.label.removeprefix('oidc:')} ({identity.describe()}), but no Archivist "
            "profile is granted to this identity, so it can see nothing.",
            "Ask the server's owner to grant a profile: `archivist profile grant PROFILE --group GROUP` "
            "(or --subject SUB, --email-domain DOMAIN).",
        )
    writable = identity.may_write or reach.write
    return await app.profiles.scope_for(list(reach.profiles), read_only=not writable, who=caller.who)


def rate_bucket(caller: Caller, settings: Settings) -> tuple[str, int] | None:
    """(bucket key, calls per minute) for this caller, or None when it is not rate-limited."""
    if caller.identity is not None:  # the issuer and subject: never a name the person chose
        return caller.identity.bucket, int(settings.rate_per_minute)
    if caller.token is not None:
        return f"token:{caller.token}", int(caller.rate_per_minute or settings.rate_per_minute)
    per_minute = int(getattr(settings, "local_rate_per_minute", 0) or 0)
    if per_minute <= 0:
        return None
    return f"local:{caller.session or caller.transport}", per_minute


def record(
    app: AccessApp,
    caller: Caller,
    scope: Scope | None,
    name: str,
    action: str | None,
    arguments: dict[str, Any],
    error_code: str | None,
    latency_ms: float,
    response_size: int,
    error_message: str | None = None,
) -> None:
    """Queue one audit entry (arguments and error message redacted there); never blocks, never raises."""
    try:
        profiles = scope.profiles if scope is not None else list(caller.profiles)
        app.audit.record(
            name, action, caller.who, profiles, arguments, error_code, latency_ms, response_size, error_message
        )
    except Exception:
        logger.warning("audit record failed", exc_info=True)
