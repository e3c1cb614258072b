"""Archivist: the MCP server, its lifespan, and the `archivist` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from services.app import Runtime
from services.settings import Settings, get_settings
from tools import crawl_website, manage_document, manage_source, resources, search_knowledge_base
from tools.common import failure, failure_from

logger = logging.getLogger("archivist")

INSTRUCTIONS = (
    "Archivist is a knowledge base. Find knowledge with search_knowledge_base; add and read documents "
    "with manage_document; organise them in sources with manage_source; crawl websites into a source "
    "in the background with crawl_website. Every tool returns JSON with success, and on failure "
    "error, error_code, retryable and suggestion."
)


def validation_failure(tool: str, exc: ValidationError) -> CallToolResult:
    problems = []
    for err in exc.errors()[:5]:
        field = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{field}: {err['msg']}")
    return failure(
        "INVALID_ARGUMENT",
        f"Invalid arguments for {tool}: " + "; ".join(problems),
        "Fix the named arguments (see the tool's input schema) and call again.",
    )


class ArchivistServer(MCPServer):
    """MCPServer whose tool errors are always the JSON error contract, never SDK prose."""

    resource_pager: Any = None  # set by tools.resources.register: resources/list, 20 per page

    async def _handle_list_resources(self, ctx: Any, params: Any) -> Any:
        if self.resource_pager is None:
            return await super()._handle_list_resources(ctx, params)
        return await self.resource_pager(params.cursor if params else None)

    async def read_resource(self, uri: Any, context: Context | None = None) -> Any:
        result = await super().read_resource(uri, context)
        return result if isinstance(result, InputRequiredResult) else resources.with_window_meta(result)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        if self._tool_manager.get_tool(name) is None:
            names = ", ".join(t.name for t in self._tool_manager.list_tools())
            return failure("NOT_FOUND", f"Unknown tool: {name}", f"Use one of: {names}.")
        try:
            from access_http import call_scope, check_rate
            from services.errors import service_error_from
            from services.scope import use_scope

            try:
                scope = await call_scope(self.runtime, getattr(self, "profiles", []))
                await check_rate(self.runtime)
            except Exception as exc:  # e.g. the database is down while checking the token or the rate
                mapped = service_error_from(exc)
                if mapped is None:
                    logger.exception("access check for %s failed", name)
                    return failure("INTERNAL", f"{name} failed with an internal error.", "Retry once.", retryable=True)
                return failure_from(mapped)
            with use_scope(scope):
                return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return validation_failure(name, exc.__cause__)
            logger.exception("tool %s raised", name)
            return failure("INTERNAL", f"{name} failed with an internal error.", "Retry once.", retryable=True)


async def run_in_process_worker(runtime: Runtime, stop: asyncio.Event) -> None:
    """The server's own crawl worker; it waits for start-up and stops with the server."""
    from services.worker import run_worker

    try:
        app = await runtime.get()
    except Exception:
        logger.warning("crawl worker not started: the knowledge base did not start")
        return
    await run_worker(app, stop)


async def run_folder_watcher(runtime: Runtime, stop: asyncio.Event) -> None:
    """`serve --watch`: keep folder sources in sync (services/sync/watch.py)."""
    from services.sync.watch import run_watcher

    try:
        app = await runtime.get()
    except Exception:
        logger.warning("folder watcher not started: the knowledge base did not start")
        return
    await run_watcher(app, stop)


def build_server(
    settings: Settings | None = None,
    *,
    run_worker: bool | None = None,
    runtime: Runtime | None = None,
    watch: bool | None = None,
    profiles: list[str] | None = None,
    auth: dict[str, Any] | None = None,
) -> ArchivistServer:
    """`profiles` confine every call (stdio / no token); `auth` = token_verifier + auth kwargs for HTTP."""
    settings = settings or get_settings()
    runtime = runtime or Runtime(settings)
    worker_enabled = settings.run_worker if run_worker is None else run_worker
    watch_enabled = settings.watch_folders if watch is None else watch

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Runtime]:
        runtime.start()  # models + database load in the background: the handshake does not wait
        stop = asyncio.Event()
        worker = asyncio.create_task(run_in_process_worker(runtime, stop)) if worker_enabled else None
        watcher = asyncio.create_task(run_folder_watcher(runtime, stop)) if watch_enabled else None
        try:
            yield runtime
        finally:
            stop.set()
            if watcher is not None:
                await asyncio.wait_for(asyncio.gather(watcher, return_exceptions=True), 10)
            if worker is not None:
                await asyncio.wait_for(asyncio.gather(worker, return_exceptions=True), 10)
            await runtime.close()

    mcp = ArchivistServer(
        name="archivist", instructions=INSTRUCTIONS, lifespan=lifespan, version="0.1.0", **(auth or {})
    )
    mcp.runtime = runtime
    mcp.profiles = list(profiles or [])
    for module in (search_knowledge_base, manage_document, manage_source, crawl_website, resources):
        module.register(mcp, runtime)
    from services.health import healthz_endpoint

    mcp.custom_route("/healthz", ["GET"], include_in_schema=False)(healthz_endpoint(runtime))
    return mcp


# ---------------------------------------------------------------- command line


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def server_command() -> list[str]:
    exe = shutil.which("archivist") or os.path.join(os.path.dirname(sys.executable), "archivist")
    return [os.path.abspath(exe), "serve"]


def client_env(settings: Settings) -> dict[str, str]:
    env = {"ARCHIVIST_ALLOWED_PATHS": os.pathsep.join(str(p) for p in settings.allowed_paths)}
    if settings.database_url:
        env["DATABASE_URL"] = settings.database_url
    else:
        env["ARCHIVIST_DATA_DIR"] = str(settings.data_dir)
    return env


def print_client_config(
    client: str, settings: Settings, http_url: str | None = None, profiles: list[str] | None = None
) -> None:
    """Print a client entry; secrets appear only as environment-variable references."""
    from cli_access import http_entry, redact_dsn

    if http_url:
        print(json.dumps(http_entry(client, http_url), indent=2))
        return
    command, *args = server_command()
    env = client_env(settings)
    if "DATABASE_URL" in env:
        env["DATABASE_URL"] = redact_dsn(env["DATABASE_URL"])
    if profiles:
        env["ARCHIVIST_PROFILES"] = ",".join(profiles)
    entry = {"command": command, "args": args, "env": env}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    if client == "vscode":
        print(json.dumps({"servers": {"archivist": {"type": "stdio", **entry}}}, indent=2))
        return
    print(json.dumps({"mcpServers": {"archivist": entry}}, indent=2))


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
    from services.sync.cli import sync_command

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
        from services.worker import run_standalone_worker

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
    from cli_access import cli_audit, cli_profile, cli_token

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="archivist", description="Archivist knowledge base for AI agents")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument("--no-worker", action="store_true", help="leave crawl jobs to `archivist worker`")
    serve.add_argument("--watch", action="store_true", help="keep folder sources in sync as their files change")
    serve.add_argument("--profile", action="append", default=None, help="confine to this profile (repeatable)")
    config = sub.add_parser("config", help="print an MCP client configuration entry")
    config.add_argument("client", choices=["claude-code", "claude-desktop", "cursor", "vscode"])
    config.add_argument("--http", default=None, metavar="URL", help="entry for a running HTTP server (bearer token)")
    config.add_argument("--profile", action="append", default=None, help="confine the stdio server (repeatable)")
    add_human_commands(sub)
    sub.add_parser("doctor", help="report database, models, worker and queue health")
    from cli_access import add_access_commands

    add_access_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    settings = get_settings()
    configure_logging(settings.log_level)
    if args.command == "serve":
        import os

        profiles = args.profile or [p for p in os.environ.get("ARCHIVIST_PROFILES", "").split(",") if p.strip()]
        host, port = args.host or settings.http_host, args.port or settings.http_port
        runtime = Runtime(settings)
        auth = None
        if args.http:
            from access_http import ArchivistTokenVerifier, auth_settings, is_loopback, tokens_exist

            has_tokens = asyncio.run(tokens_exist(settings))
            if not has_tokens and not is_loopback(host):
                print(
                    f"error: refusing to serve on {host} without access tokens.\n"
                    "Create one first: archivist token create --name NAME [--profile P]",
                    file=sys.stderr,
                )
                raise SystemExit(2)
            if has_tokens:
                auth = {"token_verifier": ArchivistTokenVerifier(runtime), "auth": auth_settings(host, port)}
        server = build_server(
            settings,
            run_worker=False if args.no_worker else None,
            runtime=runtime,
            watch=True if args.watch else None,
            profiles=profiles,
            auth=auth,
        )
        if args.http:
            from web import mount_console

            mount_console(server, runtime, settings, host)
            print(f"Archivist console: http://{host}:{port}/  (MCP: http://{host}:{port}/mcp)", file=sys.stderr)
            server.run("streamable-http", host=host, port=port, streamable_http_path="/mcp")
        else:
            server.run("stdio")
    elif args.command == "config":
        print_client_config(args.client, settings, http_url=args.http, profiles=args.profile)
    else:
        asyncio.run(run_human_command(args, settings))


if __name__ == "__main__":
    main()
