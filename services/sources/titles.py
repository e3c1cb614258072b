"""Sources named by title: found only among the caller's sources, unique per namespace.

A source's identity (title in any case, url, version) is unique per namespace
(sql/023_source_namespaces.sql): '' for the sources the local owner creates, else the profile a
confined caller's new source joins. A title another tenant took is therefore no conflict, and creating a
source under it answers exactly as for a title that exists nowhere (SECURITY.md, boundary 1;
tests/security/test_tenant_titles.py). A collision with a source the caller can see is CONFLICT naming
that source's id.

Two sources the caller can see may share one identity (the owner, who sees every namespace, or a
profile the owner gave both tenants' sources): a title then names no single source, and the caller is
asked for the source id instead of being handed either (`ambiguous`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias
from uuid import UUID

import asyncpg

from services.access.job_limits import scoped_ids
from services.core.errors import Conflict

SOURCE_COLUMNS = "id, title, description, url, source_type, status, metadata, created_at, updated_at, version"
#: the conditions of `sources` rows the caller may see ($2: its source ids, NULL = every source)
IN_SCOPE = "($2::uuid[] IS NULL OR id = ANY($2::uuid[]))"
#: at most this many ids are named in an error
SHOWN_IDS = 10

Queryable: TypeAlias = "asyncpg.Connection | asyncpg.Pool"


async def lock_title(conn: asyncpg.Connection, title: str) -> None:
    """Serialise find-or-create of one title (any case) across connections and processes."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('archivist-source:' || lower($1)))", title)


def conflict(row: asyncpg.Record) -> Conflict:
    """A collision with a source the caller can see: named, with its id."""
    return Conflict(
        f"A source titled '{row['title'][:200]}' already exists (id {row['id']}).",
        f"Use source_id='{row['id']}', or give the new source a different title, url or version.",
    )


def ambiguous(title: str, rows: Sequence[asyncpg.Record]) -> Conflict:
    """Several sources the caller can see answer to one title: it must pick one by id."""
    ids = ", ".join(str(r["id"]) for r in rows[:SHOWN_IDS])
    more = f" and {len(rows) - SHOWN_IDS} more" if len(rows) > SHOWN_IDS else ""
    return Conflict(
        f"{len(rows)} sources you can see are titled '{title[:200]}' with the same url and version "
        f"({ids}{more}); the title does not say which one is meant.",
        "Pass source_id='...' (one of these ids) instead of the title, or rename one of the sources.",
    )


def identity(row: asyncpg.Record) -> tuple[str, str, str]:
    """What the unique index compares within a namespace: title in any case, url, version."""
    return row["title"].lower(), row["url"] or "", row["version"] or ""


def twins(rows: Sequence[asyncpg.Record], chosen: asyncpg.Record) -> list[asyncpg.Record]:
    """The rows with `chosen`'s identity (itself included)."""
    return [r for r in rows if identity(r) == identity(chosen)]


async def visible_identity(
    db: Queryable, title: str, url: str | None, version: str | None, exclude: UUID | None = None
) -> list[asyncpg.Record]:
    """The caller's sources with this identity (title in any case, url, version), oldest first."""
    return await db.fetch(
        f"SELECT {SOURCE_COLUMNS} FROM sources WHERE lower(title) = lower($1) AND {IN_SCOPE} "
        "AND coalesce(url, '') = coalesce($3, '') AND coalesce(version, '') = coalesce($4, '') "
        "AND ($5::uuid IS NULL OR id <> $5) ORDER BY created_at, id",
        title,
        scoped_ids(),
        url,
        version,
        exclude,
    )


async def named(db: Queryable, title: str) -> asyncpg.Record | None:
    """The caller's source `title` names: the exact title before any other case, then the oldest (the
    versions of one library share a title). Conflict when another source it can see has the same identity."""
    rows = await db.fetch(
        f"SELECT {SOURCE_COLUMNS} FROM sources WHERE lower(title) = lower($1) AND {IN_SCOPE} "
        "ORDER BY (title = $1) DESC, created_at, id",
        title,
        scoped_ids(),
    )
    if not rows:
        return None
    same = twins(rows, rows[0])
    if len(same) > 1:
        raise ambiguous(title, same)
    return rows[0]
