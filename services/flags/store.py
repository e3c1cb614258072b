"""Flags in the database: scanning chunks stored before flags existed, rescanning, listing flagged chunks.

New chunks get their flags when they are written (services/documents/ingest.py). A knowledge base from
before flags existed holds chunks whose `flags` is NULL: *unscanned*. Every worker (the server's
in-process one, `archivist worker`) scans them in the background after start-up, in batches claimed
with FOR UPDATE SKIP LOCKED (so several workers share the work and a killed one loses nothing), from
the stored chunk text, heading path, document title and the document's hidden-text marks (present for
pages crawled since). Until then a hit shows the chunk as `unscanned`, and a profile that leaves flagged
chunks out leaves it out too (fails closed). `rescan` scans every chunk again, for when the rules change.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from services.core.database import Database
from services.flags import FLAGS_COLUMN, chunk_flags

logger = logging.getLogger(__name__)

BATCH = 500
#: a pause between batches, so a large backfill leaves the database to searches and ingestion
PAUSE_SECONDS = 0.05

_SELECT = (
    "SELECT c.id, c.text, c.heading_path, d.title, d.metadata->'hidden_marks' AS marks, "
    "d.metadata->'hidden_overflow' AS overflow "
    "FROM chunks c JOIN documents d ON d.id = c.document_id "
)
CLAIM_SQL = _SELECT + "WHERE c.flags IS NULL LIMIT $1 FOR UPDATE OF c SKIP LOCKED"
RESCAN_SQL = _SELECT + "WHERE c.id > $2 ORDER BY c.id LIMIT $1 FOR UPDATE OF c SKIP LOCKED"
WRITE_SQL = (
    "UPDATE chunks c SET flags = string_to_array(v.flags, ',') FROM unnest($1::uuid[], $2::text[]) AS v(id, flags) "
    "WHERE c.id = v.id"
)
FLAGGED_SQL = f"""
SELECT c.id AS chunk_id, c.document_id, d.title AS document_title, d.url, c.chunk_index, c.heading_path,
       left(c.text, $4) AS text, {FLAGS_COLUMN}, count(*) OVER () AS total
FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.source_id = $1 AND cardinality(c.flags) > 0
ORDER BY d.title, c.chunk_index LIMIT $2 OFFSET $3
"""


@dataclass
class Stored:
    """A stored chunk, as chunk_flags reads it."""

    text: str
    heading_path: list[str] = field(default_factory=list)


def flags_of(row: Any) -> str:
    marks = row["marks"]
    metadata = {"hidden_marks": marks if isinstance(marks, list) else [], "hidden_overflow": row["overflow"]}
    return ",".join(chunk_flags(row["title"], [Stored(row["text"], list(row["heading_path"] or []))], metadata)[0])


class FlagStore:
    """Scans and lists chunk flags (see the module docstring)."""

    def __init__(self, db: Database, batch: int = BATCH) -> None:
        self.db = db
        self.batch = batch

    async def scan_batch(self) -> int:
        """Scan up to `batch` unscanned chunks; how many were scanned (0: none left to claim)."""
        async with self.db.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(CLAIM_SQL, self.batch)
            if rows:
                await conn.execute(WRITE_SQL, [r["id"] for r in rows], [flags_of(r) for r in rows])
        return len(rows)

    async def scan_unscanned(self, stop: asyncio.Event | None = None) -> int:
        """Scan every unscanned chunk (until `stop` is set); how many were scanned."""
        done = 0
        while stop is None or not stop.is_set():
            n = await self.scan_batch()
            done += n
            if n < self.batch:
                break
            await asyncio.sleep(PAUSE_SECONDS)
        if done:
            logger.info("scanned %d chunks for injection flags", done)
        return done

    async def rescan(self) -> int:
        """Scan every chunk again (after the rules changed); how many were scanned."""
        done, after = 0, UUID(int=0)
        while True:
            async with self.db.pool.acquire() as conn, conn.transaction():
                rows = await conn.fetch(RESCAN_SQL, self.batch, after)
                if not rows:
                    return done
                await conn.execute(WRITE_SQL, [r["id"] for r in rows], [flags_of(r) for r in rows])
            done += len(rows)
            after = rows[-1]["id"]

    async def flagged(
        self, source_id: UUID, page: int = 1, per_page: int = 20, text_chars: int = 300
    ) -> tuple[list[dict[str, Any]], int]:
        """A source's flagged chunks (by document title, then position), and how many there are."""
        rows = await self.db.pool.fetch(FLAGGED_SQL, source_id, per_page, (page - 1) * per_page, text_chars)
        return [{k: v for k, v in dict(r).items() if k != "total"} for r in rows], (rows[0]["total"] if rows else 0)


async def run_scanner(db: Database, stop: asyncio.Event) -> None:
    """A worker's background task: scan what is unscanned once, at start-up (new chunks come flagged)."""
    try:
        await FlagStore(db).scan_unscanned(stop)
    except Exception:  # the database going away must not take the worker down: the next start scans on
        logger.warning("the injection-flag scan of older chunks stopped", exc_info=True)
