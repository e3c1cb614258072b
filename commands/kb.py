"""`archivist ingest`, `search` and `reembed`, and the dispatch of every knowledge-base command."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commands.output import fail, note, print_json, progress_bar, say
from commands.owner import open_archivist
from models import SEARCH_TYPES
from models.search import SearchQuery
from services.access.gate import Outcome, admitted, caller_from_token
from services.core.errors import ServiceError
from services.core.settings import Settings

if TYPE_CHECKING:
    from services.app import Archivist

#: how a re-ingest counts its files (IngestResult.status)
INGEST_LABELS = {"created": "new", "updated": "updated", "unchanged": "unchanged"}
SHOWN_SKIPPED = 20
#: results a search shows when neither -k nor a profile says (fewer than the tool's 10: a terminal)
CLI_K = 5
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
    ingest.add_argument(
        "--source-must-exist", action="store_true", help="refuse a --source naming no source (never create one)"
    )
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
    search.add_argument(
        "--type", default=None, choices=SEARCH_TYPES, help="search method (default: the profile's, else hybrid)"
    )
    search.add_argument("--source", default=None, help="only this source (title or id)")
    search.add_argument(
        "-k", type=int, default=None, metavar="K", help=f"number of results (default: the profile's, else {CLI_K})"
    )
    search.add_argument("--profile", default=None, help="search as this profile: its sources and defaults")
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
        fail(f"no such file or directory: {raw}", "Check the path (a file, or a directory to ingest everything in).")
    return path.resolve()


def count_files(path: Path, extensions: list[str] | None) -> int:
    from services.access.paths import walk_files
    from services.parsers import supported_extensions

    if path.is_file():
        return 1
    wanted = {e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions or []}
    return sum(1 for _ in walk_files(path, wanted or set(supported_extensions())))


async def cli_ingest(app: Archivist, args: argparse.Namespace) -> None:
    """Ingest files and folders, then say what happened: new / updated / unchanged documents, and every
    file that failed or was passed over, by name."""
    from services.core.errors import NotFound

    paths = [existing_path(raw) for raw in args.paths]
    try:
        source = await app.sources.resolve(args.source)
    except NotFound:
        source = (await app.sources.get_or_create(args.source, must_exist=args.source_must_exist))[0]
    outcome = IngestOutcome()
    with progress_bar("files") as bar:
        task = bar.add_task("ingesting", total=sum(count_files(p, args.ext) for p in paths), extra="")

        def progress(path: Path, result: Any, error: str | None) -> None:
            bar.advance(task)
            outcome.add(path, result, error)

        for path in paths:
            if path.is_dir():
                await app.documents.create_from_directory(
                    source.id, path, args.ext, progress=progress, passed_over=outcome.skipped
                )
            else:
                try:
                    progress(path, await app.documents.create_from_file(source.id, path), None)
                except ServiceError as exc:  # one file of several: name it, go on with the rest
                    progress(path, None, exc.message)
    outcome.report()
    stats = await app.sources.stats(source.id)
    say(f"{source.title}: {outcome.counts_line()}; {stats.documents_count} documents, {stats.chunks_count} chunks")
    if outcome.failed and not outcome.statuses:
        fail(f"no file could be ingested ({len(outcome.failed)} failed).", "See the reasons above.")


@dataclass
class IngestOutcome:
    """What one `archivist ingest` did, file by file."""

    statuses: dict[str, int] = field(default_factory=dict)  # created / updated / unchanged
    failed: list[str] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    def add(self, path: Path, result: Any, error: str | None) -> None:
        if error:
            self.failed.append(f"{path}: {error}")
        elif result is not None:
            self.statuses[result.status] = self.statuses.get(result.status, 0) + 1

    def counts_line(self) -> str:
        parts = [f"{self.statuses.get(k, 0)} {label}" for k, label in INGEST_LABELS.items()]
        return ", ".join(parts + [f"{len(self.failed)} failed", f"{len(self.skipped)} skipped"])

    def report(self) -> None:
        for failure in self.failed:
            note(f"failed: {failure}")
        for path, reason in self.skipped[:SHOWN_SKIPPED]:
            note(f"skipped: {path} ({reason})")
        if len(self.skipped) > SHOWN_SKIPPED:
            reasons: dict[str, int] = {}
            for _, reason in self.skipped[SHOWN_SKIPPED:]:
                reasons[reason] = reasons.get(reason, 0) + 1
            more = ", ".join(f"{n} {reason}" for reason, n in reasons.items())
            note(f"skipped {len(self.skipped) - SHOWN_SKIPPED} more files ({more})")


def cli_query(args: argparse.Namespace, source: str | None) -> SearchQuery:
    """The command's arguments as the one search request (services/search/query.py)."""
    count = args.k if args.k is not None or args.profile else CLI_K
    return SearchQuery(
        query=args.query,
        source_id=source,
        profile=args.profile,
        search_type=args.type,
        match_count=count,
        library=args.library,
        version=args.version,
    )


async def cli_search(app: Archivist, args: argparse.Namespace) -> None:
    source = str((await app.sources.resolve(args.source)).id) if args.source else None
    result = await app.queries.run(cli_query(args, source))
    outcome, served = result.outcome, result.served
    if args.json:
        print_json(outcome.hits)
        return
    if served is not None:
        note(f"{served.library} {served.version or '(unversioned)'}")
    if not outcome.hits:
        await say_why_nothing(app, served.source_id if served else source)
    for i, hit in enumerate(outcome.hits, 1):
        show_hit(i, hit, args.query)


def hit_label(hit: Any) -> str:
    """Where a hit is: its document, heading path and pages (a chunk number only when there is none)."""
    headings = hit.heading_path[1:] if hit.heading_path[:1] == [hit.document_title] else hit.heading_path
    where = " › ".join([hit.document_title, *headings])
    if hit.page_start:
        pages = hit.page_start if hit.page_end in (None, hit.page_start) else f"{hit.page_start}-{hit.page_end}"
        where += f" (p. {pages})"
    elif not hit.heading_path:
        where += f" (chunk {hit.chunk_index})"
    return where


def show_hit(rank: int, hit: Any, query: str) -> None:
    """The label, then the passage's matching window with the query's words in bold (on a terminal)."""
    from rich.text import Text

    from commands.output import out
    from commands.snippets import snippet

    shown = snippet(hit.text, query)
    body = Text("   " + shown.text)
    for start, end in shown.spans:
        body.stylize("bold", start + 3, end + 3)
    console = out()
    console.print(Text(f"{rank}. [{hit.score:.3f}] {hit_label(hit)}"))
    if hit.url:
        console.print(Text(f"   {hit.url}", style="dim"))
    console.print(body)


async def say_why_nothing(app: Archivist, source: Any) -> None:
    """No hit: an empty knowledge base (or source) says how to add to it; otherwise, other words."""
    stored = await app.documents.list(source, 1, 1)
    if stored.total_count == 0:
        where = "This source is empty" if source else "The knowledge base is empty"
        say(f"{where}: nothing to search yet. Add documents with: archivist ingest PATH --source NAME "
            "(or archivist crawl URL).")  # fmt: skip
        return
    say("No results. Try other words, or --type vector for meaning over keywords.")


async def run_human_command(args: argparse.Namespace, settings: Settings, stop: asyncio.Event) -> None:
    """Open the knowledge base, run the command, close it (which flushes the audit log and stops the
    embedded PostgreSQL this process started); a service error reaches cli.main, which prints it (exit 1)."""
    from commands.access import cli_audit, cli_profile, cli_token
    from commands.doctor import cli_doctor
    from commands.flags import cli_flags
    from commands.jobs import cli_crawl, cli_jobs, cli_worker
    from commands.sources import cli_documents, cli_sources
    from commands.sync import cli_sync

    if args.command == "reembed":
        from services.documents.reembed import reembed_all

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
            await as_owner(app, args, lambda: stoppable[args.command](app, args, stop))
        else:
            await as_owner(app, args, lambda: commands[args.command](app, args))
    finally:
        await app.close()


async def as_owner(app: Archivist, args: argparse.Namespace, run: Callable[[], Awaitable[None]]) -> None:
    """Run a command through the one gate as the local owner: unscoped, no rate limit (the person at
    the keyboard), and one audit record ("cli", the command and its operation) whatever the outcome;
    reading the audit log is not itself recorded."""

    async def opened() -> Archivist:
        return app

    def refuse(exc: Exception) -> None:
        raise exc

    def measure(_: None, outcome: Outcome) -> None:
        outcome.code = None

    operation = getattr(args, "op", None)
    action = f"{args.command} {operation}" if operation else args.command
    await admitted(
        opened,
        caller_from_token(None, transport="cli"),
        "cli",
        command_arguments(args),
        run,
        refuse=refuse,
        measure=measure,
        action=action,
        rate=False,
        audit=args.command != "audit",
    )


def command_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """A command's options as the audit stores them (plain values; the audit redacts secrets)."""

    def plain(value: Any) -> Any:
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return str(value)

    return {k: plain(v) for k, v in vars(args).items() if k not in ("command", "op") and not callable(v)}
