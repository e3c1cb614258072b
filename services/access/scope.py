"""The access scope of the current call: which sources it may touch and whether it may write.

Every entry point enters a scope for the duration of one action, and services read it through
`current_scope()`:

    with use_scope(Scope.owner()):          # the command line: the local owner, said out loud
        await app.queries.run(SearchQuery(...))

MCP requests enter the caller's scope in access/guard.py (token or `--profile`), console pages in
web/core.py (both through services/access/identity.py), job runners the scope of their job
(`Scope.for_job`), the worker, the folder watcher and the change poller the server's own (`server_scope`).
There is no default: `current_scope()` with no scope entered raises `NoScope` (an internal error,
logged), so a new entry point that forgets to enter one fails closed instead of reading everything.
Only services/access/ builds a Scope (the constructors below and profiles.scope_for); elsewhere only
the CLI's entry names `Scope.owner()` (tests/test_architecture.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from uuid import UUID

from services.core.errors import NotFound, PermissionDenied, ServiceError

logger = logging.getLogger(__name__)
#: the caller names of the local owner (command line, stdio, open loopback HTTP, the console, watcher)
OWNER_NAMES = frozenset({"local", "stdio", "console", "owner"})


class NoScope(ServiceError):
    """A service was called outside any entered scope: a bug at an entry point, never the caller's."""

    code = "INTERNAL"


@dataclass(frozen=True)
class Scope:
    """source_ids None = every source; read_only forbids writes; who names the caller in the audit log."""

    source_ids: frozenset[UUID] | None = frozenset()
    read_only: bool = True
    profiles: list[str] = field(default_factory=list)
    who: str = "nobody"
    #: the local owner (command line, stdio or open loopback without profiles, the console with no
    #: tokens, a job one of these queued): may have any of the server's variables sent to a site
    #: (services/access/secret_gate.py). Said explicitly, never inferred from reach: a bearer token
    #: reaching every source is not the owner.
    local_owner: bool = False
    #: running/queued crawl+sync jobs this caller may have at once (None = the setting's default)
    max_running_jobs: int | None = None
    #: directories this caller may read files under (its profiles' allowed paths, each honoured only
    #: inside the server's ARCHIVIST_ALLOWED_PATHS: services/access/paths.caller_roots); None = the server's
    #: setting (the local owner, a job), () = no files
    allowed_paths: tuple[str, ...] | None = ()
    #: flagged stored text (services/flags) is withheld from this caller wherever it leaves the server:
    #: any of its profiles says so (decided here once; services/flags/reading.py applies it to every reply)
    exclude_flagged: bool = False

    @classmethod
    def owner(cls, who: str = "local") -> Scope:
        """The local owner (command line, stdio/loopback without profiles): every source, writable."""
        return cls(source_ids=None, read_only=False, profiles=[], who=who, allowed_paths=None, local_owner=True)

    @classmethod
    def unrestricted(cls, who: str, read_only: bool = False) -> Scope:
        """A caller whose reach is every source but who is not the local owner (a token without profiles)."""
        return cls(source_ids=None, read_only=read_only, profiles=[], who=who, allowed_paths=None)

    @classmethod
    def for_job(cls, source_id: UUID, started_by: str | None, local_owner: bool = False) -> Scope:
        """A crawl/sync job runs on behalf of whoever queued it, confined to the job's own source. A folder
        sync reads its bound folder, which was checked against the binder's paths when it was bound."""
        return cls(
            source_ids=frozenset({UUID(str(source_id))}),
            read_only=False,
            who=started_by or "local",
            allowed_paths=None,
            local_owner=local_owner,
        )

    @classmethod
    def of_profiles(
        cls,
        source_ids: frozenset[UUID],
        read_only: bool,
        profiles: list[str],
        who: str,
        allowed_paths: tuple[str, ...] = (),
        exclude_flagged: bool = False,
    ) -> Scope:
        return cls(
            source_ids=frozenset(source_ids),
            read_only=read_only,
            profiles=list(profiles),
            who=who,
            allowed_paths=tuple(allowed_paths),
            exclude_flagged=exclude_flagged,
        )

    @property
    def restricted(self) -> bool:
        return self.source_ids is not None

    @property
    def namespace(self) -> str:
        """Where the sources this caller creates are unique by title, url and version (sql/023): '' for
        the unrestricted owner, else the first profile (which a new source joins), else the caller."""
        if self.source_ids is None:
            return ""
        return self.profiles[0] if self.profiles else f"caller:{self.who}"

    def narrowed(self, source_ids: frozenset[UUID] | None, profiles: list[str], exclude_flagged: bool = False) -> Scope:
        """This scope limited further to `source_ids` (e.g. one of its profiles): never wider. Flagged text
        stays withheld if it was, and is withheld too if the narrowing profile says so."""
        ids = source_ids if self.source_ids is None else (source_ids or frozenset()) & self.source_ids
        withheld = self.exclude_flagged or exclude_flagged
        return replace(self, source_ids=ids, profiles=list(profiles), exclude_flagged=withheld)

    def allows(self, source_id: UUID | str | None) -> bool:
        if self.source_ids is None:
            return True
        if source_id is None:
            return False
        return UUID(str(source_id)) in self.source_ids

    def check_source(self, source_id: UUID | str, what: str = "Source") -> None:
        """Out of scope answers exactly like a missing id (no existence leak)."""
        if not self.allows(source_id):
            raise NotFound(
                f"{what} '{source_id}' not found.", "Use manage_source(action='list') to see available sources."
            )

    def check_write(self, action: str = "This action") -> None:
        if self.read_only:
            names = ", ".join(self.profiles) or "this token"
            raise PermissionDenied(
                f"{action} is not allowed: access is read-only ({names}).",
                "Use search and read actions only (search, get, list, status).",
            )


def server_scope(who: str) -> Scope:
    """The server acting for itself, for no caller: the job worker claiming jobs (each job then runs in
    its own `for_job` scope), the folder watcher of `serve --watch` queueing syncs, the change poller
    reading what subscribers watch (each update is then scoped per listener). The owner's reach, named
    after the task in the audit log and in `started_by`."""
    return Scope.owner(who)


_current: ContextVar[Scope | None] = ContextVar("archivist_scope", default=None)


def current_scope() -> Scope:
    """The scope entered by this call's entry point; raises NoScope (logged) when none was entered."""
    scope = _current.get()
    if scope is None:
        logger.error("a service was called outside any access scope (an entry point forgot use_scope)", stack_info=True)
        raise NoScope("Internal error: this request has no access scope.", "Report it with the server's log.")
    return scope


def entered_scope() -> Scope | None:
    """The entered scope, or None (for code that must tell 'no scope yet' apart, e.g. the audit)."""
    return _current.get()


def admit(source_id: UUID) -> None:
    """Widen the current call's scope by a source it has just created (the source joined the caller's
    first profile), so the rest of the call, e.g. queueing a crawl into it, may use it."""
    scope = current_scope()
    if scope.source_ids is not None:
        _current.set(replace(scope, source_ids=scope.source_ids | {UUID(str(source_id))}))


@contextlib.contextmanager
def use_scope(scope: Scope) -> Iterator[Scope]:
    """Confine everything run inside the block (including tasks it creates) to `scope`."""
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)
