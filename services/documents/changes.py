"""What changed in a source since a time (or since a job started): documents added, updated, deleted.

Triggers (sql/020_freshness.sql) log every document created, updated (content, title or url) and
deleted in `document_changes`, an update with the headings of the sections whose chunk texts changed.
This collapses the log to one entry per document: `added` (created since then, still there),
`updated` (with every changed section and field since then) or `deleted` (a tombstone: title and url).
A document both created and deleted in the window is left out. Oldest change first, paged like every
list; only the caller's sources.
"""

from __future__ import annotations

import builtins
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from models import Page
from services.access.scope import current_scope
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound
from services.core.validation import check_page, parse_uuid
from services.jobs.sources import job_start
from services.sources.service import SourceService

SINCE_HINT = "Pass since='2026-01-31T12:00:00Z' (ISO 8601), or job_id of a crawl, recrawl or sync."
JOB_HINT = "Use crawl_website(action='list') to see jobs."

COLLAPSED = """
WITH per AS (
    SELECT document_id,
           (array_agg(source_id ORDER BY id DESC))[1] AS source_id,
           (array_agg(change ORDER BY id DESC))[1] AS last_change,
           bool_or(change = 'created') AS created,
           (array_agg(title ORDER BY id DESC))[1] AS title,
           (array_agg(url ORDER BY id DESC))[1] AS url,
           max(changed_at) AS changed_at, max(id) AS last_id
    FROM document_changes
    WHERE changed_at >= $1 AND ($2::uuid[] IS NULL OR source_id = ANY($2::uuid[]))
    GROUP BY document_id
)
SELECT *, CASE WHEN last_change = 'deleted' THEN 'deleted' WHEN created THEN 'added' ELSE 'updated' END AS kind
FROM per WHERE NOT (created AND last_change = 'deleted')
"""


def parse_since(since: str) -> datetime:
    try:
        moment = datetime.fromisoformat(since.strip())
    except ValueError:
        raise InvalidArgument(f"since is not an ISO 8601 time: {since!r}.", SINCE_HINT) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class ChangeLog:
    """Reads `document_changes` for manage_source(action='changes')."""

    def __init__(self, db: Database, sources: SourceService) -> None:
        self.db = db
        self.sources = sources

    async def since(self, source_id: str | None, since: str | None, job_id: str | None) -> tuple[datetime, UUID | None]:
        """The moment to list changes from, and the source (None: every source in scope)."""
        if bool(since) == bool(job_id):
            raise InvalidArgument("Pass exactly one of since and job_id.", SINCE_HINT)
        sid = (await self.sources.get(source_id)).id if source_id else None
        if since:
            return parse_since(since), sid
        jid = parse_uuid(job_id, "job_id", JOB_HINT)
        row = await job_start(self.db.pool, jid)
        if row is None or not current_scope().allows(row["source_id"]) or sid not in (None, row["source_id"]):
            raise NotFound(f"Job not found: {jid}", JOB_HINT)
        return row["since"], row["source_id"]

    async def list(
        self, source_id: str | None, since: str | None, job_id: str | None, page: int = 1, per_page: int = 20
    ) -> tuple[Page[dict[str, Any]], datetime, dict[str, int]]:
        """One page of changes, the moment they are counted from, and how many of each kind."""
        page, per_page = check_page(page, per_page)
        moment, sid = await self.since(source_id, since, job_id)
        scoped = current_scope().source_ids
        sources = [sid] if sid else (None if scoped is None else sorted(scoped))
        rows = await self.db.pool.fetch(
            "SELECT *, count(*) OVER () AS total, count(*) FILTER (WHERE kind = 'added') OVER () AS added, "
            "count(*) FILTER (WHERE kind = 'updated') OVER () AS updated, "
            "count(*) FILTER (WHERE kind = 'deleted') OVER () AS deleted "
            f"FROM ({COLLAPSED}) c ORDER BY last_id LIMIT $3 OFFSET $4",
            moment,
            sources,
            per_page,
            (page - 1) * per_page,
        )
        updates = await self._updates(moment, [r["document_id"] for r in rows if r["kind"] == "updated"])
        items = [self._view(r, updates.get(r["document_id"])) for r in rows]
        total = rows[0]["total"] if rows else await self._total(moment, sources)
        counts = {k: rows[0][k] if rows else 0 for k in ("added", "updated", "deleted")}
        return Page[dict[str, Any]](items=items, total_count=total, page=page, per_page=per_page), moment, counts

    async def _total(self, moment: datetime, sources: builtins.list[UUID] | None) -> int:
        return await self.db.pool.fetchval(f"SELECT count(*) FROM ({COLLAPSED}) c", moment, sources)

    async def _updates(
        self, moment: datetime, documents: builtins.list[UUID]
    ) -> dict[UUID, tuple[builtins.list[str], builtins.list[str]]]:
        """Per updated document: the sections and the fields changed since `moment`, first change first."""
        rows = await self.db.pool.fetch(
            "SELECT document_id, sections, fields FROM document_changes "
            "WHERE document_id = ANY($1::uuid[]) AND change = 'updated' AND changed_at >= $2 ORDER BY id",
            documents,
            moment,
        )
        merged: dict[UUID, tuple[list[str], list[str]]] = {}
        for r in rows:
            sections, fields = merged.setdefault(r["document_id"], ([], []))
            sections += [s for s in r["sections"] if s not in sections]
            fields += [f for f in r["fields"] if f not in fields]
        return merged

    @staticmethod
    def _view(row: Any, update: tuple[builtins.list[str], builtins.list[str]] | None) -> dict[str, Any]:
        view: dict[str, Any] = {
            "document_id": row["document_id"],
            "change": row["kind"],
            "title": row["title"],
            "url": row["url"],
            "source_id": row["source_id"],
            "changed_at": row["changed_at"],
        }
        if update is not None:
            view["changed_sections"], view["changed_fields"] = update
        return view
