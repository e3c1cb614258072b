"""Symbols for code stored before the symbol table existed (sql/038), or before its qualified references
(sql/043; issue 36).

A code file synced before sql/038 has its chunks and lines but no symbols, one synced before sql/043
no qualified references (its `code_symbol_files.qualified` is NULL): ingest writes them only when a
file is written, and a sync leaves unchanged files alone. Every worker (the server's in-process
one, `archivist worker`) therefore makes one pass at start-up in the background (a chore, as the
injection-flag scan is): the code documents of a language with tag queries that have no
`code_symbol_files` row of sql/043, in id order, a batch at a time with a pause between batches. Each file's
symbols come from its stored text, which is the file as synced (the verbatim parsers keep it so), and
are written only if, under the document's row lock, its content hash is still the one parsed and no
symbols were written meanwhile (a sync rewriting the file writes its own). That makes the pass exact,
and cheap once done: a file whose language has no queries is skipped, every other one gets a row
(`capped` says when a budget stopped it), so the next start finds nothing to do.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from uuid import UUID

from services.code.symbol_store import delete_symbols, file_symbols, write_extracted
from services.core.database import Database

logger = logging.getLogger(__name__)

BATCH = 50
PAUSE_SECONDS = 0.05
PENDING_SQL = """
SELECT d.id, d.source_id, d.content_hash, d.content, d.metadata FROM documents d
WHERE d.id > $1 AND d.document_type = 'code'
  AND NOT EXISTS (SELECT 1 FROM code_symbol_files f WHERE f.document_id = d.id AND f.qualified IS NOT NULL)
ORDER BY d.id LIMIT $2
"""
UNCHANGED_SQL = (
    "SELECT 1 FROM documents d WHERE d.id = $1 AND d.content_hash = $2 "
    "AND NOT EXISTS (SELECT 1 FROM code_symbol_files f WHERE f.document_id = d.id AND f.qualified IS NOT NULL) "
    "FOR UPDATE OF d"
)


async def backfill_symbols(db: Database, stop: asyncio.Event | None = None, batch: int = BATCH) -> int:
    """Write the symbols of every code document that has none (until `stop` is set); how many were written."""
    written, after = 0, UUID(int=0)
    while stop is None or not stop.is_set():
        rows = await db.pool.fetch(PENDING_SQL, after, batch)
        for row in rows:
            written += await _backfill_one(db, row)
        if len(rows) < batch:
            break
        after = rows[-1]["id"]
        await asyncio.sleep(PAUSE_SECONDS)
    if written:
        logger.info("wrote the symbols of %d code files stored before the symbol table", written)
    return written


async def _backfill_one(db: Database, row: Any) -> int:
    metadata = row["metadata"] if isinstance(row["metadata"], dict) else {}
    symbols = await asyncio.to_thread(file_symbols, row["content"] or "", metadata)
    if symbols is None:  # a language without tag queries: never has symbols
        return 0
    async with db.pool.acquire() as conn, conn.transaction():
        if await conn.fetchval(UNCHANGED_SQL, row["id"], row["content_hash"]) is None:
            return 0  # rewritten (with its symbols) or deleted since it was read
        await delete_symbols(conn, row["id"])  # rows written before sql/043, if any
        await write_extracted(conn, row["id"], row["source_id"], symbols)
    return 1


async def run_symbol_backfill(db: Database, stop: asyncio.Event) -> None:
    """A worker's background task: one pass at start-up (files written since get their symbols on write)."""
    try:
        await backfill_symbols(db, stop)
    except Exception:  # the database going away must not take the worker down: the next start goes on
        logger.warning("the symbol backfill of older code files stopped", exc_info=True)
