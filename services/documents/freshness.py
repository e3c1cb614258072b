"""How fresh a document is: what every search result and `get` says about when its text was taken.

- `fetched_at`: a page fetched from the web (crawled, or ingested by url), the last time it was
  fetched, a 304 included;
- `ingested_at`: files and text, when the current content was stored;
- `indexed_at`: when the document's chunks were last written;
- `last_modified`: the server's Last-Modified of a page, or a file's mtime, when known.

The columns are kept by triggers (sql/020_freshness.sql) and by the crawl frontier (a 304 refreshes
`fetched_at`); Last-Modified and mtime come from the document's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from uuid import UUID

import asyncpg

#: Document metadata keys: a page's HTTP Last-Modified, and a file's mtime (ISO 8601).
HTTP_LAST_MODIFIED = "last_modified"
FILE_MTIME = "file_mtime"


def last_modified(metadata: Mapping[str, Any] | None) -> datetime | None:
    """The server's Last-Modified of a page, else a file's mtime; None when unknown or unreadable."""
    metadata = metadata or {}
    header = metadata.get(HTTP_LAST_MODIFIED)
    if isinstance(header, str) and header.strip():
        try:
            parsed = parsedate_to_datetime(header)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except (TypeError, ValueError, IndexError):
            return None
    mtime = metadata.get(FILE_MTIME)
    if isinstance(mtime, str):
        try:
            return datetime.fromisoformat(mtime)
        except ValueError:
            return None
    return None


def file_mtime(mtime_seconds: float) -> str:
    """A file's mtime as stored in metadata."""
    return datetime.fromtimestamp(mtime_seconds, UTC).isoformat()


def freshness_fields(
    fetched_at: datetime | None,
    ingested_at: datetime | None,
    indexed_at: datetime | None,
    metadata: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """`fetched_at` (web pages) or `ingested_at` (files, text), `indexed_at`, and `last_modified` when known."""
    fields: dict[str, Any] = {"fetched_at": fetched_at} if fetched_at is not None else {"ingested_at": ingested_at}
    fields["indexed_at"] = indexed_at
    modified = last_modified(metadata)
    if modified is not None:
        fields["last_modified"] = modified
    return fields


async def freshness_of(pool: asyncpg.Pool, document_ids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """The freshness fields of several documents, in one query."""
    if not document_ids:
        return {}
    rows = await pool.fetch(
        "SELECT id, fetched_at, ingested_at, indexed_at, "
        f"jsonb_build_object('{HTTP_LAST_MODIFIED}', metadata->'{HTTP_LAST_MODIFIED}', "
        f"'{FILE_MTIME}', metadata->'{FILE_MTIME}') AS metadata "
        "FROM documents WHERE id = ANY($1::uuid[])",
        list(dict.fromkeys(document_ids)),
    )
    return {r["id"]: freshness_fields(r["fetched_at"], r["ingested_at"], r["indexed_at"], r["metadata"]) for r in rows}
