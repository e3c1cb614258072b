"""The GIN index over `chunks.tsv`, kept only when the ts_rank keyword leg is configured (issue 37).

Only `keyword_ranking = "ts_rank"` reads it (services/search/legs.py `TS_RANK_LEG`: `tsv @@ query`).
The default BM25 leg reads its own postings (sql/042) and `chunks.tsv` row by row for the candidates it
scores exactly, never through this index; yet the index cost ~213 bytes a chunk and ~40 s of a
million-chunk build. So each start makes the index match the setting: built (with a progress line)
when ts_rank is configured and it is missing, dropped when BM25 is configured and it is there. Under
the migrations' advisory lock, so two processes starting at once never build it twice; with a short
lock timeout, so a start never waits behind a long write on `chunks`: the index is then left as it is
(the ts_rank leg answers without it, by a sequential scan) and the next start tries again.
"""

from __future__ import annotations

import logging

import asyncpg

from services.core.database import MIGRATION_LOCK_KEY, Database

logger = logging.getLogger(__name__)

GIN_INDEX = "chunks_tsv_gin_idx"
CREATE_GIN_SQL = f"CREATE INDEX IF NOT EXISTS {GIN_INDEX} ON chunks USING gin (tsv)"
DROP_GIN_SQL = f"DROP INDEX IF EXISTS {GIN_INDEX}"
LOCK_TIMEOUT = "5s"


def wants_gin(keyword_ranking: str) -> bool:
    """Whether the configured keyword leg reads the GIN index (ts_rank's `tsv @@ query`)."""
    return keyword_ranking == "ts_rank"


async def match_keyword_index(db: Database, keyword_ranking: str) -> str:
    """Build or drop the GIN index so it exists exactly when `keyword_ranking` reads it; returns what
    was done: "kept", "built", "dropped" or "busy" (a lock not granted in time: left as it was)."""
    wanted = wants_gin(keyword_ranking)
    async with db.pool.acquire() as conn:
        if await _has_gin(conn) == wanted:
            return "kept"
        try:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
                if await _has_gin(conn) == wanted:  # another process did it meanwhile
                    return "kept"
                if wanted:
                    chunks = await conn.fetchval(
                        "SELECT reltuples::bigint FROM pg_class WHERE oid = 'chunks'::regclass"
                    )
                    logger.info("building %s for keyword_ranking=ts_rank (~%d chunks)", GIN_INDEX, max(chunks, 0))
                    await conn.execute(CREATE_GIN_SQL)
                else:
                    await conn.execute(DROP_GIN_SQL)
                    logger.info("dropped %s: only keyword_ranking=ts_rank reads it", GIN_INDEX)
        except asyncpg.LockNotAvailableError:
            logger.warning("%s left as it is: chunks busy; the next start tries again", GIN_INDEX)
            return "busy"
    return "built" if wanted else "dropped"


async def _has_gin(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", GIN_INDEX))
