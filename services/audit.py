"""Audit log of tool calls: `record()` only queues; a background task writes batches, off the
request path. A full queue or a failing write drops entries (counted in `dropped`), never the call."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from datetime import timedelta
from typing import Any

from models import Page
from models.access import AuditEntry
from services.database import Database
from services.validation import check_page

logger = logging.getLogger(__name__)
LONG_TEXT = 200
COLUMNS = "id, at, tool, action, who, profiles, arguments, error_code, latency_ms, response_bytes"


def redact(arguments: dict[str, Any]) -> dict[str, Any]:
    """Replace long text bodies by their length and hash."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str) and len(value) > LONG_TEXT:
            out[key] = {"length": len(value), "sha256": hashlib.sha256(value.encode()).hexdigest()[:16]}
        else:
            out[key] = value
    return out


class AuditService:
    def __init__(self, db: Database, max_queue: int = 10_000, batch: int = 200, flush_seconds: float = 0.5) -> None:
        self.db = db
        self.batch = batch
        self.flush_seconds = flush_seconds
        self._queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue(max_queue)
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.written = 0

    def record(
        self,
        tool: str,
        action: str | None,
        who: str,
        profiles: list[str],
        arguments: dict[str, Any],
        error_code: str | None,
        latency_ms: float,
        response_bytes: int,
    ) -> None:
        """Queue one entry; never blocks, never raises."""
        try:
            args = json.dumps(redact(arguments), default=str)
            self._queue.put_nowait((tool, action, who, list(profiles), args, error_code, latency_ms, response_bytes))
            if self._task is None or self._task.done():
                self._task = asyncio.get_running_loop().create_task(self._run(), name="audit-writer")
        except Exception:
            self.dropped += 1

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            rows = [item]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.flush_seconds):
                    while len(rows) < self.batch:
                        rows.append(await self._queue.get())
            await self._write(rows)

    async def _write(self, rows: list[tuple[Any, ...]]) -> None:
        try:
            async with self.db.pool.acquire() as conn:
                await conn.executemany(
                    "INSERT INTO audit_log (tool, action, who, profiles, arguments, error_code, latency_ms, "
                    "response_bytes) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8)",
                    rows,
                )
            self.written += len(rows)
        except Exception:
            self.dropped += len(rows)
            logger.warning("audit write failed; %d entries dropped", len(rows), exc_info=True)

    async def flush(self) -> None:
        """Write everything queued now (tests, shutdown)."""
        rows: list[tuple[Any, ...]] = []
        while not self._queue.empty():
            rows.append(self._queue.get_nowait())
        if rows:
            await self._write(rows)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.flush()

    async def prune(self, keep: timedelta) -> int:
        done = await self.db.pool.execute("DELETE FROM audit_log WHERE at < now() - $1::interval", keep)
        return int(done.split()[-1])

    async def query(
        self,
        since: timedelta | None = None,
        tool: str | None = None,
        token: str | None = None,
        errors_only: bool = False,
        page: int = 1,
        per_page: int = 20,
    ) -> Page[AuditEntry]:
        page, per_page = check_page(page, per_page)
        conds: list[str] = []
        params: list[Any] = []
        if since is not None:
            params.append(since)
            conds.append(f"at >= now() - ${len(params)}::interval")
        if tool:
            params.append(tool)
            conds.append(f"tool = ${len(params)}")
        if token:
            params.append(token)
            conds.append(f"who = ${len(params)}")
        if errors_only:
            conds.append("error_code IS NOT NULL")
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        rows, total = await self.db.fetch_page(COLUMNS, f"audit_log{where}", "at DESC, id DESC", params, page, per_page)
        items = []
        for r in rows:
            d = dict(r)
            if isinstance(d["arguments"], str):
                d["arguments"] = json.loads(d["arguments"])
            items.append(AuditEntry(**d))
        return Page[AuditEntry](items=items, total_count=total, page=page, per_page=per_page)
