"""Token-bucket rate limits kept in PostgreSQL, so every server process on one database shares them.

One statement per call: the bucket's row is locked only while PostgreSQL runs it, never across a round
trip to this process (50 agents sharing one bucket would otherwise queue on the row lock behind every
busy moment of the event loop).

A bucket refills at the caller's rate (calls per minute) and holds at most the burst: ARCHIVIST_RATE_BURST
calls at once (0, the default: a minute's worth, the rate itself). `peek` reads a bucket without taking
from it, for the X-RateLimit-* headers of HTTP replies (access/rate_headers.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from services.core.database import Database
from services.core.errors import RateLimited

# $1 key, $2 capacity (the burst), $3 refill per second. Returns the tokens before this call's take.
TAKE = """
WITH current AS (
    SELECT key, least($2::float8, tokens
           + greatest(extract(epoch FROM clock_timestamp() - updated_at)::float8, 0) * $3::float8) AS refilled
    FROM rate_buckets WHERE key = $1 FOR UPDATE
)
UPDATE rate_buckets b
SET tokens = current.refilled - CASE WHEN current.refilled >= 1 THEN 1 ELSE 0 END, updated_at = clock_timestamp()
FROM current WHERE b.key = current.key
RETURNING current.refilled
"""
# the same refill, read only: (tokens now or NULL for a bucket never used, the time now)
PEEK = """
SELECT (SELECT least($2::float8, tokens
               + greatest(extract(epoch FROM clock_timestamp() - updated_at)::float8, 0) * $3::float8)
        FROM rate_buckets WHERE key = $1) AS tokens,
       extract(epoch FROM clock_timestamp())::float8 AS now
"""


@dataclass(frozen=True)
class RateState:
    """A bucket as the X-RateLimit-* headers tell it: `limit` calls per minute, `remaining` calls that may
    be made at once now, `reset` the Unix time (seconds) when the bucket is full again."""

    limit: int
    remaining: int
    reset: int


class RateLimiter:
    def __init__(self, db: Database, burst: int = 0) -> None:
        self.db = db
        self.burst = burst

    def capacity(self, per_minute: int) -> float:
        """Calls a bucket holds: the burst setting, else a minute's worth."""
        return float(self.burst or per_minute)

    async def take(self, key: str, per_minute: int) -> None:
        """Take one call from `key`'s bucket (refilled per_minute/60 per second, holding at most the
        burst); raise RateLimited with retry_after_seconds when it is empty."""
        rate, capacity = per_minute / 60.0, self.capacity(per_minute)
        tokens = await self.db.pool.fetchval(TAKE, key, capacity, rate)
        if tokens is None:  # first call for this key: a full bucket, then take from it
            await self.db.pool.execute(
                "INSERT INTO rate_buckets (key, tokens) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                key,
                capacity,
            )
            tokens = await self.db.pool.fetchval(TAKE, key, capacity, rate)
        if tokens < 1.0:
            wait = math.ceil((1.0 - tokens) / rate * 10) / 10
            raise RateLimited(
                f"Rate limit of {per_minute} calls per minute reached.",
                f"Retry in {wait:g} seconds.",
                retry_after_seconds=wait,
            )

    async def peek(self, key: str, per_minute: int) -> RateState:
        """`key`'s bucket now, without taking a call (a bucket never used is full)."""
        rate, capacity = per_minute / 60.0, self.capacity(per_minute)
        row = await self.db.pool.fetchrow(PEEK, key, capacity, rate)
        tokens = capacity if row["tokens"] is None else float(row["tokens"])
        reset = math.ceil(row["now"] + (capacity - tokens) / rate) if rate > 0 else math.ceil(row["now"])
        return RateState(limit=per_minute, remaining=max(0, math.floor(tokens)), reset=reset)
