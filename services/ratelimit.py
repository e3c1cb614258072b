"""Token-bucket rate limits kept in PostgreSQL, so every server process on one database shares them."""

from __future__ import annotations

import math

from services.database import Database
from services.errors import RateLimited


class RateLimiter:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def take(self, key: str, per_minute: int) -> None:
        """Take one call from `key`'s bucket (capacity = per_minute, refilled per_minute/60 per second);
        raise RateLimited with retry_after_seconds when it is empty."""
        rate = per_minute / 60.0
        async with self.db.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO rate_buckets (key, tokens) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                key,
                float(per_minute),
            )
            row = await conn.fetchrow(
                "SELECT tokens, extract(epoch FROM clock_timestamp() - updated_at)::float8 AS age "
                "FROM rate_buckets WHERE key = $1 FOR UPDATE",
                key,
            )
            tokens = min(float(per_minute), row["tokens"] + max(row["age"], 0.0) * rate)
            allowed = tokens >= 1.0
            if allowed:
                tokens -= 1.0
            await conn.execute(
                "UPDATE rate_buckets SET tokens = $2, updated_at = clock_timestamp() WHERE key = $1", key, tokens
            )
        if not allowed:
            wait = math.ceil((1.0 - tokens) / rate * 10) / 10
            exc = RateLimited(f"Rate limit of {per_minute} calls per minute reached.", f"Retry in {wait:g} seconds.")
            exc.retry_after_seconds = wait  # type: ignore[attr-defined]
            raise exc
