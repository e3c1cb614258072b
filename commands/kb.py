"""`archivist ingest`, `search` and `reembed`, and the dispatch of every knowledge-base command."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from commands.output import fail, note, print_json, progress_bar, say
from commands.owner import open_archivist
from models import SEARCH_TYPES
from services.settings import Settings

#: commands that stop themselves on a signal (handing jobs back); the others are cancelled
GRACEFUL = {"crawl", "sync", "worker"}


def add_kb_commands(sub: Any) -> None:
    ingest = sub.add_parser(
        "ingest",
        help="ingest files or directories into a source",
        description="Ingest files, or every supported file under directories, into a source (created if "
        "missing). Any file you can read may be ingested from the command line.",
        epilog="examples:\n  archivist ingest ~/notes --source Notes\n  archivist ingest report.pdf --source Reports",
    )
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="a file or directory to ingest")
    ingest.add_argument("--source", required=True, help="source title (created if missing) or id")
    ingest.add_argument("--ext", action="append", metavar="EXT", help="only these extensions (repeatable), e.g. .md")
    search = sub.add_parser(
        "search",
        help="search the knowledge base",
        description="Search the knowledge base: hybrid (vectors and keywords, the default), vector, keyword (BM25 "
        "only) or rerank.",
        epilog='examples:\n  archivist search "how do I configure logging"\n'
        '  archivist search "asyncio timeout" --library Python --version 3.12 -k 3 --json',
    )
    search.add_argument("query", help="a question or keywords")
    search.add_argument("--type", default="hybrid", choices=SEARCH_TYPES, help="search method (default: hybrid)")
    search.add_argument("--source", default=None, help="only this source (title or id)")
    search.add_argument("-k", type=int, default=5, metavar="K", help="number of results (default: 5)")
    search.add_argument("--library", default=None, help="only this library (a source title)")
    search.add_argument("--version", default=None, help="library version: exact (3.11) or range (3.x, >=2.1)")
    search.add_argument("--json", action="store_true", help="print JSON for scripts")
    sub.add_parser(
        "reembed",
        help="re-embed every chunk with the configured embedding model",
        description="Re-embed every chunk with ARCHIVIST_EMBEDDING_MODEL and rebuild the vector index.",
        epilog="example:\n  ARCHIVIST_EMBEDDING_MODEL=... archivist reembed",
    )


def existing_path(raw: str) -> Path:
    path = Path(raw).expanduser()
    if not path.exists():
        fail(f"no such file or directory: {raw}")
    return path.resolve()


def count_files(path: Path, extensions: list[str] | None) -> int:
    from services.parsers import supported_extensions
    from services.paths import walk_files

    if path.is_file():
        return 1
    wanted = {e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions or []}
    return sum(1 for _ in walk_files(path, wanted or set(supported_extensions())))


async def cli_ingest(app: Any, args: argparse.Namespace) -> None:
    from services.errors import NotFound

    paths = [existing_path(raw) for raw in args.paths]
    try:
        source = await app.sources.resolve(args.source)
    except NotFound:
        source = (await app.sources.get_or_create(args.source))[0]
    failures: list[str] = []
    with progress_bar("files") as bar:
        task = bar.add_task("ingesting", total=sum(count_files(p, args.ext) for p in paths), extra="")

        def progress(path: Path, result: Any, error: str | None) -> None:
            bar.advance(task)
            if error:
                failures.append(f"{path}: {error}")

        for path in paths:
            if path.is_dir():
                await app.documents.create_from_directory(source.id, path, args.ext, progress=progress)
            else:
                progress(path, await app.documents.create_from_file(source.id, path), None)
    for failure in failures:
        note(f"failed: {failure}")
    stats = await app.sources.stats(source.id)
    say(f"{source.title}: {stats.documents_count} documents, {stats.chunks_count} chunks")


async def cli_search(app: Any, args: argparse.Namespace) -> None:
    source = (await app.sources.resolve(args.source)).id if args.source else None
    served = None
    if args.library or args.version:
        from services.versions import resolve

        library = args.library or (await app.sources.resolve(args.source)).title
        served = await resolve(app.db, library, args.version)
        source = served.source_id
    outcome = await app.search.search(args.query, source, args.k, args.type)
    if args.json:
        print_json(outcome.hits)
        return
    if served is not None:
        note(f"{served.library} {served.version or '(unversioned)'}")
    if not outcome.hits:
        say("No results. Try other words, or --type vector for meaning over keywords.")
    for i, hit in enumerate(outcome.hits, 1):
        snippet = " ".join(hit.text.split())[:200]
        say(f"{i}. [{hit.score:.3f}] {hit.document_title} (chunk {hit.chunk_index})\n   {snippet}")


async def run_human_command(args: argparse.Namespace, settings: Settings, stop: asyncio.Event) -> None:
    """Open the knowledge base, run the command, close it (which flushes the audit log and stops the
    embedded PostgreSQL this process started); a service error is one readable line, exit code 2."""
    from commands.access import cli_audit, cli_profile, cli_token
    from commands.doctor import cli_doctor
    from commands.flags import cli_flags
    from commands.jobs import cli_crawl, cli_jobs, cli_worker
    from commands.sources import cli_documents, cli_sources
    from commands.sync import cli_sync
    from services.errors import ServiceError

    if args.command == "reembed":
        from services.reembed import reembed_all

        await reembed_all(settings)
        return
    if args.command == "doctor":
        await cli_doctor(settings, args)
        return
    if args.command == "worker":
        await cli_worker(settings, args, stop)
        return
    commands: dict[str, Any] = {
        "ingest": cli_ingest,
        "search": cli_search,
        "sources": cli_sources,
        "documents": cli_documents,
        "jobs": cli_jobs,
        "profile": cli_profile,
        "token": cli_token,
        "audit": cli_audit,
        "flags": cli_flags,
    }
    stoppable = {"crawl": cli_crawl, "sync": cli_sync}
    app = await open_archivist(settings)
    try:
        if args.command in stoppable:
            await stoppable[args.command](app, args, stop)
        else:
            await commands[args.command](app, args)
    except ServiceError as exc:
        fail(exc.message, exc.suggestion)
    finally:
        await app.close()
