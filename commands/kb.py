"""The `archivist` command line for people: ingest, search, sources, crawl, jobs, sync, worker, doctor."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from services.settings import Settings


def add_human_commands(sub: Any) -> None:
    ingest = sub.add_parser("ingest", help="ingest files or directories into a source")
    ingest.add_argument("paths", nargs="+")
    ingest.add_argument("--source", required=True, help="source title (created if missing) or id")
    ingest.add_argument("--ext", action="append", help="only these extensions (repeatable), e.g. --ext .md")
    search = sub.add_parser("search", help="search the knowledge base")
    search.add_argument("query")
    search.add_argument("--type", default="hybrid", choices=["vector", "hybrid", "rerank"])
    search.add_argument("--source", default=None, help="source id")
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--library", default=None, help="only this library (source title)")
    search.add_argument("--version", default=None, help="library version: exact (3.11) or range (3.x, >=2.1)")
    sub.add_parser("sources", help="list sources with their document and chunk counts")
    crawl = sub.add_parser("crawl", help="crawl a website into a source, with a live progress bar")
    crawl.add_argument("url")
    crawl.add_argument("--source", default=None, help="source id (default: a source named after the site)")
    crawl.add_argument("--title", default=None, help="title of a new source")
    crawl.add_argument("--max-pages", type=int, default=20)
    crawl.add_argument("--max-depth", type=int, default=2)
    crawl.add_argument("--single", action="store_true", help="only the given page (not recursive)")
    crawl.add_argument("--include", action="append", default=None, help="URL pattern to keep (repeatable)")
    crawl.add_argument("--exclude", action="append", default=None, help="URL pattern to skip (repeatable)")
    crawl.add_argument("--scope", default="same-host", choices=["same-host", "same-domain", "under-path"])
    crawl.add_argument("--no-worker", action="store_true", help="only queue the job and follow it")
    jobs = sub.add_parser("jobs", help="list crawl jobs, newest first")
    jobs.add_argument("--status", default=None, choices=["queued", "running", "completed", "failed", "cancelled"])
    worker = sub.add_parser("worker", help="run a standalone crawl worker against the configured database")
    worker.add_argument("--id", default=None, help="worker id (default: host:pid)")
    worker.add_argument("--jobs", type=int, default=2, help="jobs run at once")
    sub.add_parser("reembed", help="re-embed every chunk with the configured embedding model")
    sync = sub.add_parser("sync", help="sync a folder source with its directory, with a progress bar")
    sync.add_argument("source", help="folder source id or title, or a directory (bound to a new source if needed)")
    sync.add_argument("--title", default=None, help="title of a new folder source")
    sync.add_argument("--include", action="append", default=None, help="glob of files to keep (repeatable)")
    sync.add_argument("--exclude", action="append", default=None, help="glob of files to skip (repeatable)")
    sync.add_argument("--no-recursive", action="store_true", help="only the directory's top level")


async def open_archivist(settings: Settings) -> Any:
    from services.app import Archivist

    return await Archivist.open(settings)


async def cli_ingest(app: Any, args: argparse.Namespace) -> None:
    from pathlib import Path

    from tqdm import tqdm

    from services.paths import resolve_allowed_path

    try:
        source_id = (await app.sources.get(args.source)).id
    except Exception:
        source_id = (await app.sources.get_or_create(args.source))[0].id
    bar = tqdm(desc="ingesting", unit="file", file=sys.stderr)

    def progress(path: Path, result: Any, error: str | None) -> None:
        bar.update(1)
        if error:
            bar.write(f"failed: {path}: {error}", file=sys.stderr)

    for raw in args.paths:
        path = resolve_allowed_path(raw, app.settings.allowed_paths)
        if path.is_dir():
            await app.documents.create_from_directory(source_id, path, args.ext, progress=progress)
        else:
            result = await app.documents.create_from_file(source_id, path)
            progress(path, result, None)
    bar.close()
    stats = await app.sources.stats(source_id)
    print(f"source {source_id}: {stats.documents_count} documents, {stats.chunks_count} chunks")


async def cli_search(app: Any, args: argparse.Namespace) -> None:
    source = args.source
    if args.library or args.version:
        from services.versions import resolve

        library = args.library or (await app.sources.get(args.source)).title
        served = await resolve(app.db, library, args.version)
        print(f"{served.library} {served.version or '(unversioned)'}")
        source = served.source_id
    outcome = await app.search.search(args.query, source, args.k, args.type)
    for i, hit in enumerate(outcome.hits, 1):
        snippet = " ".join(hit.text.split())[:200]
        print(f"{i}. [{hit.score:.3f}] {hit.document_title} (chunk {hit.chunk_index})\n   {snippet}")
    if not outcome.hits:
        print("no results")


async def cli_sources(app: Any, args: argparse.Namespace) -> None:
    page_no = 1
    while True:
        page = await app.sources.list(page_no, 20)
        for source in page.items:
            stats = await app.sources.stats(source.id)
            print(
                f"{source.id}  {source.title}  [{source.source_type}]  "
                f"{stats.documents_count} documents, {stats.chunks_count} chunks"
            )
        if not page.has_more:
            break
        page_no += 1


async def cli_crawl(app: Any, args: argparse.Namespace) -> None:
    import math

    from tqdm import tqdm

    from services.worker import run_worker

    started = await app.jobs.start(
        args.url,
        source_id=args.source,
        title=args.title,
        recursive=not args.single,
        max_depth=args.max_depth,
        max_pages=args.max_pages,
        include_patterns=args.include,
        exclude_patterns=args.exclude,
        scope=args.scope,
    )
    for note in started.notes:
        print(note, file=sys.stderr)
    stop = asyncio.Event()
    worker = None if args.no_worker else asyncio.create_task(run_worker(app, stop))
    bar = tqdm(total=started.job.params.max_pages, desc="crawling", unit="page", file=sys.stderr)

    async def show(job: Any) -> None:
        bar.n = job.pages_crawled
        bar.set_postfix(failed=job.pages_failed, pending=job.pages_pending, refresh=False)
        bar.refresh()

    try:
        job = await app.jobs.wait(started.job.id, math.inf, on_progress=show)
    except (KeyboardInterrupt, asyncio.CancelledError):
        job, _ = await app.jobs.cancel(started.job.id)
    finally:
        bar.close()
        stop.set()
        if worker is not None:
            await asyncio.gather(worker, return_exceptions=True)
    print(f"job {job.id}: {job.status}")
    print(json.dumps(job.counters(), default=str, indent=2))
    for message in [job.error, *job.warnings]:
        if message:
            print(message, file=sys.stderr)


async def cli_sync(app: Any, args: argparse.Namespace) -> None:
    from commands.sync import sync_command

    await sync_command(app, args.source, args.title, args.include, args.exclude, False if args.no_recursive else None)


async def cli_jobs(app: Any, args: argparse.Namespace) -> None:
    page_no = 1
    while True:
        page = await app.jobs.list(args.status, None, page_no, 20)
        for job in page.items:
            print(
                f"{job.id}  {job.status:<9}  {job.pages_crawled:>4} pages  {job.created_at:%Y-%m-%d %H:%M}  "
                f"{job.params.url}"
            )
        if not page.has_more:
            break
        page_no += 1


async def run_human_command(args: argparse.Namespace, settings: Settings) -> None:
    if args.command == "reembed":
        from services.reembed import reembed_all

        await reembed_all(settings)
        return
    if args.command == "doctor":
        await cli_doctor(settings)
        return
    if args.command == "worker":
        from services.app import run_standalone_worker

        await run_standalone_worker(settings, args.id, args.jobs)
        return
    commands = {
        "ingest": cli_ingest,
        "search": cli_search,
        "sources": cli_sources,
        "crawl": cli_crawl,
        "jobs": cli_jobs,
        "sync": cli_sync,
    }
    from commands.access import cli_audit, cli_profile, cli_token

    commands.update({"profile": cli_profile, "token": cli_token, "audit": cli_audit})
    from services.errors import ServiceError

    app = await open_archivist(settings)
    try:
        await commands[args.command](app, args)
    except ServiceError as exc:
        print(f"error: {exc.message}\n{exc.suggestion}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        await app.close()


async def cli_doctor(settings: Settings) -> None:
    """Print the health report (database, models, worker, queue); exit 1 when the database is down."""
    from services.errors import service_error_from
    from services.health import report

    try:
        app = await open_archivist(settings)
    except Exception as exc:
        mapped = service_error_from(exc)
        reason = f"{mapped.message} {mapped.suggestion}" if mapped else f"{type(exc).__name__}: {exc}"
        print(json.dumps({"ok": False, "database": {"ok": False, "error": reason}}, indent=2))
        raise SystemExit(1) from None
    try:
        body = await report(app)
    finally:
        await app.close()
    print(json.dumps(body, indent=2, default=str))
    if not body["ok"]:
        raise SystemExit(1)
