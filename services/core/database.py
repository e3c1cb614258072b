"""PostgreSQL access: the embedded server or DATABASE_URL, the pool, migrations, model checks."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from services.core import embedded
from services.core.errors import ServiceError, Unavailable, connect_failure
from services.core.settings import Settings

logger = logging.getLogger(__name__)

#: The migrations, found in the installed `sql` package (package data of the wheel, or the checkout).
SQL_DIR = files("sql")
MIGRATION_NAME = re.compile(r"[0-9]{3}_\w+\.sql")
MIGRATION_LOCK_KEY = 0x41524348  # "ARCH": one advisory lock id for every Archivist process
# The replica pool for `Database.pool` inside `Database.reading()`; None outside it.
_use_replica: contextvars.ContextVar[asyncpg.Pool | None] = contextvars.ContextVar("use_replica", default=None)


class ConfigMismatch(ServiceError):
    """The database was built for another embedding model or dimension."""

    code = "CONFIG_MISMATCH"


@dataclass(frozen=True)
class IndexConfig:
    """What the stored vectors and keyword index were built with."""

    embedding_model: str
    embedding_dim: int
    fts_config: str


async def resolve_dsn(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    logger.info("starting embedded PostgreSQL in %s", settings.data_dir / "pgdata")
    return await asyncio.to_thread(embedded.start_embedded_server, settings.data_dir)


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(kind, encoder=_json_dumps, decoder=_json_loads, schema="pg_catalog")


async def _no_session_state(conn: asyncpg.Connection) -> None:
    """Pool reset: nothing to undo (see `Database._create_pool`)."""


@asynccontextmanager
async def _named_on_failure(setting: str, dsn: str | None) -> AsyncIterator[None]:
    """A first connection that fails names the setting and the host:port it tried (not "retry")."""
    try:
        yield
    except Exception as exc:
        named = connect_failure(exc, setting, dsn) if dsn else None
        if named is None:
            raise
        raise named from exc


def session_settings(ef_search: int) -> dict[str, str]:
    """Search settings sent at connection start-up (never a `SET`: pooled connections keep no session
    state, and start-up values are what a `RESET` returns to).
    relaxed_order: a filtered HNSW scan keeps going until it has enough rows (pgvector 0.8).
    force_custom_plan: a prepared statement is planned for its parameters every time. After five runs
    PostgreSQL may switch to one generic plan, whose different join and aggregation order summed a
    chunk's BM25 terms in another order: equal-text chunks then tied differently, and the same search
    ranked differently from its sixth run on (and the hybrid legs run apart differently from one
    statement, services/search/parallel.py)."""
    return {
        "hnsw.ef_search": str(int(ef_search)),
        "hnsw.iterative_scan": "relaxed_order",
        "plan_cache_mode": "force_custom_plan",
    }


def _json_dumps(value: Any) -> str:
    import json

    return json.dumps(value, default=str)


def _json_loads(value: str) -> Any:
    import json

    return json.loads(value)


async def ensure_vector_extension(dsn: str) -> None:
    """Create pgvector before the pool registers its codec; name the missing extension clearly."""
    conn = await asyncpg.connect(dsn)
    try:
        available = await conn.fetchval("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
        if not available:
            raise Unavailable(
                "The PostgreSQL server at DATABASE_URL does not have the pgvector extension ('vector').",
                "Install pgvector on that server, or unset DATABASE_URL to use the embedded PostgreSQL.",
                retryable=False,
            )
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    finally:
        await conn.close()


def migration_files() -> list[Traversable]:
    found = sorted((p for p in SQL_DIR.iterdir() if MIGRATION_NAME.fullmatch(p.name)), key=lambda p: p.name)
    if not found:  # a server without its schema would fail later, table by table
        raise RuntimeError(f"no migrations found in {SQL_DIR}: the installed package is incomplete")
    return found


def migration_file(number: str) -> Traversable:
    """The migration whose name starts with `number` (e.g. "007")."""
    return next(p for p in migration_files() if p.name.startswith(f"{number}_"))


async def read_index_config(conn: asyncpg.Connection) -> IndexConfig | None:
    exists = await conn.fetchval("SELECT to_regclass('archivist_config') IS NOT NULL")
    if not exists:
        return None
    rows = await conn.fetch("SELECT key, value FROM archivist_config")
    values = {r["key"]: r["value"] for r in rows}
    if "embedding_model" not in values:
        return None
    return IndexConfig(values["embedding_model"], int(values["embedding_dim"]), values["fts_config"])


async def write_index_config(conn: asyncpg.Connection, config: IndexConfig) -> None:
    await conn.executemany(
        "INSERT INTO archivist_config (key, value) VALUES ($1, $2) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        [
            ("embedding_model", config.embedding_model),
            ("embedding_dim", str(config.embedding_dim)),
            ("fts_config", config.fts_config),
        ],
    )


def mismatch_error(stored: IndexConfig, wanted: IndexConfig) -> ConfigMismatch:
    return ConfigMismatch(
        f"This database holds vectors from embedding model '{stored.embedding_model}' "
        f"({stored.embedding_dim} dims) but the server is configured for '{wanted.embedding_model}' "
        f"({wanted.embedding_dim} dims). Vectors from two models are never mixed.",
        "Either set ARCHIVIST_EMBEDDING_MODEL back to the stored model, or re-embed every chunk with "
        "the new model by running `archivist reembed` once (it rebuilds the vector index).",
    )


def migration_summary(text: str) -> str:
    """A migration's first comment line: the progress line on stderr while a long conversion runs."""
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    return first.removeprefix("--").strip()[:200]


async def apply_migrations(conn: asyncpg.Connection, wanted: IndexConfig) -> IndexConfig:
    """Apply pending sql/NNN_*.sql files in order under an advisory lock; returns the config in force."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await conn.execute("CREATE TABLE IF NOT EXISTS archivist_config (key text PRIMARY KEY, value text NOT NULL)")
        stored = await read_index_config(conn)
        if stored is None:
            await write_index_config(conn, wanted)
            stored = wanted
        elif (stored.embedding_model, stored.embedding_dim) != (wanted.embedding_model, wanted.embedding_dim):
            raise mismatch_error(stored, wanted)
        applied = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for path in migration_files():
            version = path.name.removesuffix(".sql")
            if version in applied:
                continue
            text = path.read_text()
            logger.info("applying migration %s: %s", version, migration_summary(text))
            sql = text.format(embedding_dim=stored.embedding_dim, fts_config=stored.fts_config)
            await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", version)
    return stored


class Database:
    """Owns the connection pools; `start()` connects, migrates and checks the embedding model.

    With `read_database_url` set (a streaming replica), reads inside `async with db.reading():` go to
    the replica through `db.pool`, unless the replica has not yet replayed the WAL position this
    process last wrote at: then they stay on the primary, so a client reads its own writes."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.dsn: str | None = None
        self._pool: asyncpg.Pool | None = None
        self._read_pool: asyncpg.Pool | None = None
        self._last_write_lsn: int = 0
        self._replica_lsn_seen: int = 0
        self.replica_reads = 0
        self.primary_fallbacks = 0
        self.config: IndexConfig | None = None
        self._holds_embedded = False  # this object counts as a user of the embedded server (services/core/embedded.py)

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise Unavailable("The database is not connected yet.", "Retry in a few seconds.")
        replica = _use_replica.get()
        if replica is not None and replica is self._read_pool:
            return replica
        return self._pool

    @property
    def has_replica(self) -> bool:
        return self._read_pool is not None

    async def start(self, embedding_model: str, embedding_dim: int) -> None:
        self.dsn = await resolve_dsn(self.settings)
        async with _named_on_failure("DATABASE_URL", self.dsn if self.settings.database_url else None):
            await ensure_vector_extension(self.dsn)
        wanted = IndexConfig(embedding_model, embedding_dim, self.settings.fts_config)
        conn = await asyncpg.connect(self.dsn)
        try:
            self.config = await apply_migrations(conn, wanted)
        finally:
            await conn.close()
        self._pool = await self._create_pool(self.dsn, track_writes=bool(self.settings.read_database_url))
        if self.settings.read_database_url:
            async with _named_on_failure("ARCHIVIST_READ_DATABASE_URL", self.settings.read_database_url):
                self._read_pool = await self._create_pool(self.settings.read_database_url, track_writes=False)
        if not self.settings.database_url:  # the embedded server is ours to keep alive
            from services.core.errors import watch_data_dir
            from services.core.supervisor import Supervisor

            watch_data_dir(self.settings.data_dir / "pgdata")  # a full / read-only disk is named in errors

            self.supervisor = Supervisor(self.settings.data_dir / "pgdata", on_restart=self._pool.expire_connections)
            self.supervisor.start()
            embedded.acquire(self.settings.data_dir)
            self._holds_embedded = True

    async def _create_pool(self, dsn: str, track_writes: bool) -> asyncpg.Pool:
        """The pool. Its connections keep no session state (no SET, LISTEN, cursors, temporary tables or
        session advisory locks: the crawl's host locks have their own pool), so a released connection
        skips asyncpg's reset query (one round trip per use); asyncpg still rolls back an open transaction."""
        return await asyncpg.create_pool(
            dsn,
            min_size=self.settings.db_pool_min,
            max_size=self.settings.db_pool_max,
            init=_init_connection,
            server_settings=session_settings(self.settings.hnsw_ef_search),
            reset=self._reset_and_track if track_writes else _no_session_state,
        )

    async def _reset_and_track(self, conn: asyncpg.Connection) -> None:
        """On release of a primary connection: note the WAL position, which is at or past every commit
        that connection made."""
        lsn = await conn.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        self._last_write_lsn = max(self._last_write_lsn, int(lsn))

    @asynccontextmanager
    async def reading(self, wait_seconds: float = 0.05) -> AsyncIterator[None]:
        """Send `db.pool` work inside this block to the read replica when it has caught up with this
        process's writes (waiting up to `wait_seconds`); otherwise to the primary."""
        replica = self._read_pool
        if replica is None or not await self._replica_caught_up(replica, wait_seconds):
            if replica is not None:
                self.primary_fallbacks += 1
            yield
            return
        self.replica_reads += 1
        token = _use_replica.set(replica)
        try:
            yield
        finally:
            _use_replica.reset(token)

    async def _replica_caught_up(self, replica: asyncpg.Pool, wait_seconds: float) -> bool:
        wanted = self._last_write_lsn
        if self._replica_lsn_seen >= wanted:
            return True
        deadline = asyncio.get_running_loop().time() + wait_seconds
        while True:
            try:
                replayed = await replica.fetchval("SELECT pg_last_wal_replay_lsn() - '0/0'::pg_lsn")
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                logger.warning("read replica unreachable; reading from the primary", exc_info=True)
                return False
            if replayed is None:  # not a standby: it is the primary itself, always current
                self._replica_lsn_seen = max(self._replica_lsn_seen, wanted)
                return True
            self._replica_lsn_seen = max(self._replica_lsn_seen, int(replayed))
            if self._replica_lsn_seen >= wanted:
                return True
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.005)

    async def fetch_page(
        self,
        columns: str,
        from_where: str,
        order_by: str,
        params: list[Any],
        page: int,
        per_page: int,
        join: str = "",
        start: int | None = None,
    ) -> tuple[list[asyncpg.Record], int]:
        """One page of `SELECT columns FROM from_where ORDER BY order_by`, and the total row count.
        `from_where` is "table [alias] [WHERE ...]" with $1..$n from `params`; `join` (for the page's
        columns only, never counted) goes between the table and its WHERE. page/per_page are validated.
        `start` (a row offset, for a client paging by offset) replaces the page's own offset."""
        table, _, where = from_where.partition(" WHERE ")
        where = f"WHERE {where}" if where else ""
        n = len(params)
        async with self.pool.acquire() as conn:
            total = await conn.fetchval(f"SELECT count(*) FROM {table} {where}", *params)
            rows = await conn.fetch(
                f"SELECT {columns} FROM {table} {join} {where} ORDER BY {order_by} LIMIT ${n + 1} OFFSET ${n + 2}",
                *params,
                per_page,
                (page - 1) * per_page if start is None else start,
            )
        return rows, total

    @property
    def fts_config(self) -> str:
        return self.config.fts_config if self.config else self.settings.fts_config

    async def close(self) -> None:
        if getattr(self, "supervisor", None) is not None:
            from services.core.errors import watch_data_dir

            await self.supervisor.stop()
            watch_data_dir(None)
        if self._read_pool is not None:
            await self._read_pool.close()
            self._read_pool = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._holds_embedded:
            self._holds_embedded = False
            await asyncio.to_thread(embedded.release, self.settings.data_dir)
