"""Warm after a restart (issue 37): the search indexes are read once in the background at start.

After a restart the first searches read their index pages from disk: 168 / 271 ms p50 / p95 at a
million chunks against 34–41 ms warm (docs/performance.md). So the server reads, once and in the
background, the relations every search touches, most useful first, as long as they fit in half of the
memory the system reports available (MemAvailable): a larger knowledge base warms its HNSW graph and
postings and leaves the rest to the queries.

How it reads, in order of preference:
* `pg_prewarm` when the server has it (a DATABASE_URL server; created if the role may): into
  PostgreSQL's own buffers;
* otherwise, when the data directory is on this machine and readable (the embedded server, which
  ships no pg_prewarm), the relation files themselves, sequentially, in a thread: into the operating
  system's page cache, from which PostgreSQL's reads are then memory copies;
* otherwise nothing (logged): the first queries warm the cache as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from services.core.database import Database

logger = logging.getLogger(__name__)

#: What a search reads, most useful first: the HNSW graph, the BM25 postings, the hits' rows.
SEARCH_RELATIONS = (
    "chunks_embedding_hnsw_idx",
    "term_blocks_term_idx",
    "term_blocks",
    "chunk_seqs_pkey",
    "chunk_seqs",
    "chunks_pkey",
    "chunks",
    "documents_pkey",
    "chunks_tsv_gin_idx",
    "documents",
)
READ_BLOCK = 1 << 20
SEGMENT = 1 << 30  # PostgreSQL splits a relation into files of 1 GB: path, path.1, path.2, ...
SIZES_SQL = """
SELECT r.name, c.oid::regclass::text AS rel, pg_relation_size(c.oid) AS bytes, pg_relation_filepath(c.oid) AS path
FROM unnest($1::text[]) WITH ORDINALITY AS r(name, n) JOIN pg_class c ON c.oid = to_regclass(r.name)
ORDER BY r.n
"""


@dataclass
class Warmed:
    method: str = "none"
    relations: list[str] = field(default_factory=list)
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)


def memory_budget() -> int:
    """Half of what /proc/meminfo reports available (0 where it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 0


def read_relation_files(base: Path, size: int) -> int:
    """Read a relation's segment files through the page cache; returns the bytes read."""
    done = 0
    for segment in range((size + SEGMENT - 1) // SEGMENT or 1):
        path = base if segment == 0 else base.with_name(f"{base.name}.{segment}")
        try:
            with path.open("rb", buffering=0) as f:
                while chunk := f.read(READ_BLOCK):
                    done += len(chunk)
        except FileNotFoundError:
            break
    return done


async def _has_prewarm(db: Database) -> bool:
    async with db.pool.acquire() as conn:
        if await conn.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'pg_prewarm'"):
            return True
        if not await conn.fetchval("SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_prewarm'"):
            return False
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        except Exception as exc:  # no privilege: fall back to reading files
            logger.info("warm start: pg_prewarm is available but not installable (%s)", exc)
            return False
        return True


async def _data_directory(db: Database) -> Path | None:
    try:
        found = Path(str(await db.pool.fetchval("SELECT current_setting('data_directory')")))
    except Exception:  # not allowed to read it (not superuser / pg_read_all_settings)
        return None
    return found if os.access(found / "base", os.R_OK | os.X_OK) else None


async def warm_search_indexes(db: Database, budget: int | None = None) -> Warmed:
    """Read the search relations once, within `budget` bytes (default: `memory_budget()`)."""
    budget = memory_budget() if budget is None else budget
    rows = await db.pool.fetch(SIZES_SQL, list(SEARCH_RELATIONS))
    warmed = Warmed()
    data_dir = None
    if await _has_prewarm(db):
        warmed.method = "pg_prewarm"
    elif (data_dir := await _data_directory(db)) is not None:
        warmed.method = "files"
    else:
        logger.info("warm start: neither pg_prewarm nor the data directory is at hand; the first queries warm it")
        return warmed
    for row in rows:
        if warmed.bytes + row["bytes"] > budget:
            warmed.skipped.append(row["rel"])
            continue
        if data_dir is None:
            await db.pool.execute("SELECT pg_prewarm($1::regclass)", row["rel"])
            warmed.bytes += row["bytes"]
        else:
            warmed.bytes += await asyncio.to_thread(read_relation_files, data_dir / row["path"], row["bytes"])
        warmed.relations.append(row["rel"])
    logger.info(
        "warm start (%s): read %d MB of %s%s",
        warmed.method,
        warmed.bytes >> 20,
        ", ".join(warmed.relations) or "nothing",
        f"; over the memory budget: {', '.join(warmed.skipped)}" if warmed.skipped else "",
    )
    return warmed
