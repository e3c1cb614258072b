"""The access scope of the current call: which sources it may touch and whether it may write.

A caller sets it for the duration of one action, and services read it through `current_scope()`:

    with use_scope(Scope(source_ids=frozenset(ids), read_only=True, profiles=["docs"], who="alice")):
        await app.search.search(...)

Tool dispatch sets it from the token / `--profile` selection; a web route sets it the same way, so
the console applies the same rules. No scope set = unrestricted (the local CLI owner).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from uuid import UUID

from services.errors import NotFound, PermissionDenied


@dataclass(frozen=True)
class Scope:
    """source_ids None = every source; read_only forbids writes; who names the caller in the audit log."""

    source_ids: frozenset[UUID] | None = None
    read_only: bool = False
    profiles: list[str] = field(default_factory=list)
    who: str = "local"
    #: running/queued crawl+sync jobs this caller may have at once (None = the setting's default)
    max_running_jobs: int | None = None

    @property
    def restricted(self) -> bool:
        return self.source_ids is not None

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


UNRESTRICTED = Scope()
_current: ContextVar[Scope] = ContextVar("archivist_scope", default=UNRESTRICTED)


def current_scope() -> Scope:
    return _current.get()


def admit(source_id: UUID) -> None:
    """Widen the current call's scope by a source it has just created (the source joined the caller's
    first profile), so the rest of the call, e.g. queueing a crawl into it, may use it."""
    scope = _current.get()
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
