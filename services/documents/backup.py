"""Backups that restore: PostgreSQL's own pg_dump / pg_restore, for the embedded database and for
DATABASE_URL alike.

An archive is pg_dump's custom format (compressed, restorable table by table). Restoring refuses a
knowledge base that already holds sources unless forced, and an archive whose vectors come from another
embedding model unless the caller re-embeds afterwards (`services/documents/reembed.py`)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from services.core.database import resolve_dsn
from services.core.errors import Conflict, InvalidArgument, Unavailable
from services.core.settings import Settings
from services.embeddings import configured_model_name

logger = logging.getLogger(__name__)

#: progress(done, total): tables written or read so far, of all tables with data
Progress = Callable[[int, int], None]
#: pg_dump / pg_restore --verbose name each table as they reach it (one short line each)
TABLE_LINE = re.compile(r'(?:dumping contents of|processing data for) table "([^"\n]{1,200})"')
COUNTED_TABLES = ("sources", "documents", "chunks")


@dataclass(frozen=True)
class BackupReport:
    path: Path
    bytes: int
    counts: dict[str, int]
    embedding_model: str | None


def pg_tool(name: str) -> str:
    """The newest pg_dump/pg_restore here: the embedded install's (PostgreSQL 18), else PATH's."""
    try:
        import pgserver

        bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / name
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which(name)
    if found is None:
        raise Unavailable(f"{name} is not installed.", "Install PostgreSQL's client tools.", retryable=False)
    return found


async def table_counts(dsn: str) -> dict[str, int]:
    """Rows in sources, documents and chunks (0 where a table does not exist yet)."""
    conn = await asyncpg.connect(dsn)
    try:
        counts = {}
        for table in COUNTED_TABLES:
            exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"public.{table}")
            counts[table] = int(await conn.fetchval(f"SELECT count(*) FROM {table}")) if exists else 0
        return counts
    finally:
        await conn.close()


async def data_table_count(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
    finally:
        await conn.close()


async def run_tool(args: list[str], total: int, progress: Progress | None) -> None:
    """Run a PostgreSQL tool, reporting each table it reaches; its error output becomes the message."""
    process = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    done, problems = 0, []
    async for raw in process.stderr:
        line = raw.decode(errors="replace").rstrip()
        if TABLE_LINE.search(line):
            done += 1
            if progress:
                progress(min(done, total), total)
        elif "error" in line.lower():
            problems.append(line)
    if await process.wait() != 0:
        detail = "; ".join(problems[-3:]) or f"exit code {process.returncode}"
        raise Unavailable(f"{Path(args[0]).name} failed: {detail}"[:600], "See the message above.", retryable=False)
    if progress:
        progress(total, total)


async def backup(settings: Settings, path: Path, progress: Progress | None = None) -> BackupReport:
    """Write the whole knowledge base to `path` (pg_dump custom format)."""
    dsn = await resolve_dsn(settings)
    path = path.expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    total = await data_table_count(dsn)
    partial = path.with_name(path.name + ".partial")
    args = [pg_tool("pg_dump"), "--format=custom", "--no-owner", "--verbose", f"--file={partial}", dsn]
    await run_tool(args, total, progress)
    os.replace(partial, path)  # a failed dump never leaves a file that looks like a backup
    return BackupReport(path, path.stat().st_size, await table_counts(dsn), await archive_model(path))


async def archive_model(path: Path) -> str | None:
    """The embedding model recorded in an archive (its archivist_config table), read without restoring."""
    args = [pg_tool("pg_restore"), "--data-only", "--table=archivist_config", "--file=-", str(path)]
    process = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise InvalidArgument(
            f"{path.name} is not an Archivist backup: {err.decode(errors='replace').strip()[:300]}",
            "Give a file written by `archivist backup`.",
        )
    for line in out.decode(errors="replace").splitlines():
        key, _, value = line.partition("\t")
        if key == "embedding_model":
            return value
    return None


async def knowledge_base_is_empty(dsn: str) -> bool:
    counts = await table_counts(dsn)
    return counts["sources"] == 0 and counts["documents"] == 0


async def clear_schema(dsn: str) -> None:
    """Drop everything in the public schema (a forced restore replaces the knowledge base whole)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    finally:
        await conn.close()


async def check_restorable(settings: Settings, path: Path, dsn: str, force: bool, reembed: bool) -> str | None:
    """Refuse a non-empty target without force, and another model's vectors without reembed."""
    if not path.is_file():
        raise InvalidArgument(f"No backup at {path}.", "Give the path of a file written by `archivist backup`.")
    model = await archive_model(path)
    wanted = configured_model_name(settings)
    if model is not None and model != wanted and not reembed:
        raise Conflict(
            f"The backup's vectors come from embedding model '{model}', but this server uses '{wanted}'.",
            "Restore with --reembed to re-embed every chunk with the configured model, or configure that model.",
        )
    if not force and not await knowledge_base_is_empty(dsn):
        raise Conflict(
            "The knowledge base is not empty; restoring would replace it.",
            "Restore into an empty data directory, or pass --force to replace everything.",
        )
    return model


async def restore(
    settings: Settings, path: Path, *, force: bool = False, reembed: bool = False, progress: Progress | None = None
) -> BackupReport:
    """Restore an archive written by `backup`; then migrations bring it to this version's schema."""
    path = path.expanduser().resolve()
    dsn = await resolve_dsn(settings)
    model = await check_restorable(settings, path, dsn, force, reembed)
    await clear_schema(dsn)
    total = await archive_table_count(path)
    args = [pg_tool("pg_restore"), "--no-owner", "--exit-on-error", "--verbose", f"--dbname={dsn}", str(path)]
    await run_tool(args, total, progress)
    if reembed and model != configured_model_name(settings):
        from services.documents.reembed import reembed_all

        await reembed_all(settings)
    return BackupReport(path, path.stat().st_size, await table_counts(dsn), model)


async def archive_table_count(path: Path) -> int:
    """Tables with data in an archive (its table of contents), for the progress bar's total."""
    process = await asyncio.create_subprocess_exec(
        pg_tool("pg_restore"), "--list", str(path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    return sum(1 for line in out.decode(errors="replace").splitlines() if " TABLE DATA " in line) or 1
