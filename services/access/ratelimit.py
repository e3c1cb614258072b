"""Token-bucket rate limits kept in PostgreSQL, so every server process on one database shares them.

One statement per call: the bucket's row is locked only while PostgreSQL runs it, never across a round
trip to this process (50 agents sharing one bucket would otherwise queue on the row lock behind every
busy moment of the event loop)."""

from __future__ import annotations

import math

from services.database import Database
from services.errors import RateLimited

# $1 key, $2 capacity (= per minute), $3 refill per second. Returns the tokens before this call's take.
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


class RateLimiter:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def take(self, key: str, per_minute: int) -> None:
        """Take one call from `key`'s bucket (capacity = per_minute, refilled per_minute/60 per second);
        raise RateLimited with retry_after_seconds when it is empty."""
        rate = per_minute / 60.0
        tokens = await self.db.pool.fetchval(TAKE, key, float(per_minute), rate)
        if tokens is None:  # first call for this key: a full bucket, then take from it
            await self.db.pool.execute(
                "INSERT INTO rate_buckets (key, tokens) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                key,
                float(per_minute),
            )
            tokens = await self.db.pool.fetchval(TAKE, key, float(per_minute), rate)
        if tokens < 1.0:
            wait = math.ceil((1.0 - tokens) / rate * 10) / 10
            exc = RateLimited(f"Rate limit of {per_minute} calls per minute reached.", f"Retry in {wait:g} seconds.")
            exc.retry_after_seconds = wait  # type: ignore[attr-defined]
            raise exc


def bucket(token_name: str | None, token_rate: int | None, default_rate: int) -> tuple[str, int]:
    """(key, calls per minute) of a caller's bucket: a token's own (its override, else the default),
    else the one shared by unauthenticated local callers. MCP calls and console actions both use it."""
    if token_name is None:
        return "local", int(default_rate)
    return f"token:{token_name}", int(token_rate or default_rate)
