"""Audit log of MCP calls (tools, resource reads, every gated request): `record()` only queues; a
background task writes batches, off the request path, so a slow or failing write never slows or fails a call.

A batch write waits at most `write_timeout` seconds (PostgreSQL's statement_timeout, e.g. behind a
locked table); a failed batch is retried with backoff and counted in `late` once written, or in
`dropped` after `max_attempts` (as are entries refused by a full queue). `stats()` reports the counts
(the server's /healthz shows them).

A failed call keeps its error message, redacted (services/access/redaction.py) and cut to
ERROR_MESSAGE_LIMIT characters. `summary()` gives calls per profile and tool with p50/p95 latency, and
the most frequent queries (`archivist audit --stats`, the console's activity page)."""

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
from services.access.redaction import redact, redact_text
from services.core.database import Database
from services.core.validation import check_page

logger = logging.getLogger(__name__)
LONG_TEXT = 200
ERROR_MESSAGE_LIMIT = 500
COLUMNS = "id, at, tool, action, who, profiles, arguments, error_code, error_message, latency_ms, response_bytes"
#: the arguments as a JSON object (entries written before issue 32 hold them as a JSON string of one)
ARGUMENTS = "(CASE jsonb_typeof(arguments) WHEN 'string' THEN (arguments #>> '{}')::jsonb ELSE arguments END)"


def shorten(arguments: dict[str, Any]) -> dict[str, Any]:
    """Replace long text bodies by their length and hash."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str) and len(value) > LONG_TEXT:
            out[key] = {"length": len(value), "sha256": hashlib.sha256(value.encode()).hexdigest()[:16]}
        else:
            out[key] = value
    return out


def stored_error(message: str | None) -> str | None:
    """An error message as stored: secrets redacted, then cut to ERROR_MESSAGE_LIMIT characters."""
    if not message:
        return None
    text = redact_text(str(message))
    return text if len(text) <= ERROR_MESSAGE_LIMIT else text[: ERROR_MESSAGE_LIMIT - 1] + "…"


def stored_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as stored: long text shortened (hashed), secrets redacted at any depth first
    (services/access/redaction.py), so no secret reaches the log whether it is short or nested; made
    JSON-safe here, and stored as a JSON object (the pool's jsonb codec encodes it)."""
    stored: dict[str, Any] = json.loads(json.dumps(shorten(redact(arguments)), default=str))
    return stored


class AuditService:
    def __init__(
        self,
        db: Database,
        max_queue: int = 10_000,
        batch: int = 200,
        flush_seconds: float = 0.5,
        write_timeout: float = 2.0,
        max_attempts: int = 6,
        enabled: bool = True,
    ) -> None:
        self.db = db
        self.enabled = enabled
        self.batch = batch
        self.flush_seconds = flush_seconds
        self.write_timeout = write_timeout
        self.max_attempts = max_attempts
        self._queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue(max_queue)
        self._task: asyncio.Task[None] | None = None
        self._retry: list[tuple[Any, ...]] = []  # the batch that failed, written before anything newer
        self._held: list[tuple[Any, ...]] = []  # the batch the writer has taken and not yet written
        self._attempts = 0
        self.dropped = 0
        self.written = 0
        self.late = 0  # entries written only after a failed attempt

    def stats(self) -> dict[str, int]:
        queued = self._queue.qsize() + len(self._retry) + len(self._held)
        return {"queued": queued, "written": self.written, "late": self.late, "dropped": self.dropped}

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
        error_message: str | None = None,
    ) -> None:
        """Queue one entry; never blocks, never raises."""
        if not self.enabled:
            return
        try:
            args = stored_arguments(arguments)
            message = stored_error(error_message) if error_code else None
            row = (tool, action, who, list(profiles), args, error_code, latency_ms, response_bytes, message)
            self._queue.put_nowait(row)
            if self._task is None or self._task.done():
                self._task = asyncio.get_running_loop().create_task(self._run(), name="audit-writer")
        except Exception:
            self.dropped += 1

    async def _run(self) -> None:
        while True:
            if self._retry:
                self._held, self._retry = self._retry, []
            else:
                self._held = [await self._queue.get()]
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.flush_seconds):
                        while len(self._held) < self.batch:
                            self._held.append(await self._queue.get())
            rows = self._held
            if await self._write(rows):
                self._held = []
                continue
            self._held = []
            self._attempts += 1
            if self._attempts >= self.max_attempts:
                self.dropped += len(rows)
                self._attempts = 0
                logger.warning("audit write failed %d times; %d entries dropped", self.max_attempts, len(rows))
            else:
                self._retry = rows
                await asyncio.sleep(min(0.25 * 2**self._attempts, 5.0))

    async def _write(self, rows: list[tuple[Any, ...]]) -> bool:
        """Write one batch within write_timeout; True when written (counted), False to retry it."""
        try:
            async with asyncio.timeout(self.write_timeout + 5), self.db.pool.acquire() as conn, conn.transaction():
                await conn.execute(f"SET LOCAL statement_timeout = {max(1, int(self.write_timeout * 1000))}")
                await conn.executemany(
                    "INSERT INTO audit_log (tool, action, who, profiles, arguments, error_code, latency_ms, "
                    "response_bytes, error_message) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9)",
                    rows,
                )
        except Exception as exc:
            logger.warning("audit write of %d entries failed (%s: %s); will retry", len(rows), type(exc).__name__, exc)
            return False
        self.written += len(rows)
        if self._attempts:
            self.late += len(rows)
            self._attempts = 0
        return True

    async def flush(self) -> None:
        """Write everything queued now (tests, shutdown); what cannot be written is counted as dropped."""
        rows, self._retry = self._retry, []
        while not self._queue.empty():
            rows.append(self._queue.get_nowait())
        if rows and not await self._write(rows):
            self.dropped += len(rows)

    async def close(self) -> None:
        """Drain before the database closes: the writer stops, and the batch it held (cancelled mid-wait or
        mid-write, so not committed) is written with everything still queued. A loss is counted and logged."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        held, self._held = self._held, []
        self._retry = held + self._retry
        dropped = self.dropped
        await self.flush()
        if self.dropped > dropped:
            logger.warning("audit log: %d entries could not be written at shutdown", self.dropped - dropped)

    async def prune(self, keep: timedelta) -> int:
        done = await self.db.pool.execute("DELETE FROM audit_log WHERE at < now() - $1::interval", keep)
        return int(done.split()[-1])

    async def summary(
        self, since: timedelta, tool: str | None = None, token: str | None = None, top: int = 10
    ) -> dict[str, Any]:
        """Calls, errors and p50/p95 latency (ms) in all and per profile and tool (a call made through
        two profiles counts for each; "" = no profile), and the `top` most frequent search queries."""
        where, params = self._filters(since, tool, token)
        stats = (
            "count(*) AS calls, count(error_code) AS errors, "
            "percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50_ms, "
            "percentile_cont(0.95) WITHIN GROUP (ORDER BY latency_ms) AS p95_ms"
        )
        async with self.db.pool.acquire() as conn:
            total = await conn.fetchrow(f"SELECT {stats} FROM audit_log{where}", *params)
            groups = await conn.fetch(
                f"SELECT coalesce(p.name, '') AS profile, tool, {stats} FROM audit_log "
                "LEFT JOIN LATERAL unnest(profiles) AS p(name) ON true"
                f"{where} GROUP BY 1, 2 ORDER BY calls DESC, profile, tool LIMIT 50",
                *params,
            )
            searched = f"{where} AND" if where else " WHERE"
            queries = await conn.fetch(
                f"SELECT {ARGUMENTS}->>'query' AS query, count(*) AS calls FROM audit_log{searched} "
                f"tool = 'search_knowledge_base' AND jsonb_typeof({ARGUMENTS}->'query') = 'string' "
                f"GROUP BY 1 ORDER BY calls DESC, query LIMIT {int(top)}",
                *params,
            )
        return {
            "total": dict(total),
            "by_profile_tool": [dict(r) for r in groups],
            "top_queries": [dict(r) for r in queries],
        }

    @staticmethod
    def _filters(since: timedelta | None, tool: str | None, token: str | None) -> tuple[str, list[Any]]:
        """The WHERE clause (with its leading space, or "") and parameters of the common filters."""
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
        return (f" WHERE {' AND '.join(conds)}" if conds else ""), params

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
        where, params = self._filters(since, tool, token)
        if errors_only:
            where = f"{where} AND error_code IS NOT NULL" if where else " WHERE error_code IS NOT NULL"
        rows, total = await self.db.fetch_page(COLUMNS, f"audit_log{where}", "at DESC, id DESC", params, page, per_page)
        items = []
        for r in rows:
            d = dict(r)
            if isinstance(d["arguments"], str):
                d["arguments"] = json.loads(d["arguments"])
            items.append(AuditEntry(**d))
        return Page[AuditEntry](items=items, total_count=total, page=page, per_page=per_page)
