"""`archivist crawl`, `jobs` and `worker`: queue and follow crawl jobs, and run workers.

A stop signal never loses work: the in-process worker hands its running job back to the queue, and the
next worker (`archivist worker`, or `archivist serve`) resumes it from its frontier.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from commands.output import fail, note, print_json, print_table, progress_bar, say, when
from models.jobs import JOB_STATUSES as ALL_JOB_STATUSES
from models.jobs import WARNING_STATUSES, CrawlRequest
from services.core.settings import Settings

if TYPE_CHECKING:
    from services.app import Archivist

JOB_STATUSES = list(ALL_JOB_STATUSES)


def add_job_commands(sub: Any) -> None:
    crawl = sub.add_parser(
        "crawl",
        help="crawl a website into a source, with a live progress bar",
        description="Crawl a website into a source. The job runs in this process (unless --no-worker or "
        "--detach); Ctrl-C hands it back to the queue, where any worker resumes it.",
        epilog="examples:\n  archivist crawl https://docs.python.org/3/ --max-pages 50\n"
        "  archivist crawl https://example.com/docs --scope under-path --detach",
    )
    crawl.add_argument("url", help="the page to start from (http or https)")
    crawl.add_argument(
        "--source", default=None, help="source title or id to crawl into (default: a source named after the site)"
    )
    crawl.add_argument("--title", default=None, help="title of a new source")
    crawl.add_argument("--source-must-exist", action="store_true", help="with --title: refuse a title naming no source")
    crawl.add_argument("--max-pages", type=int, default=None, metavar="N", help="stop after N pages (default: 20)")
    crawl.add_argument(
        "--max-depth", type=int, default=None, metavar="N", help="follow links N levels deep (default: 2)"
    )
    crawl.add_argument("--single", action="store_true", help="only the given page (not recursive)")
    crawl.add_argument("--include", action="append", default=None, metavar="PATTERN", help="URL pattern to keep")
    crawl.add_argument("--exclude", action="append", default=None, metavar="PATTERN", help="URL pattern to skip")
    crawl.add_argument(
        "--scope",
        default="same-host",
        choices=["same-host", "same-domain", "under-path"],
        help="which links to follow (default: same-host)",
    )
    crawl.add_argument("--no-worker", action="store_true", help="queue the job and follow it; a worker runs it")
    crawl.add_argument("--detach", action="store_true", help="queue the job and return at once")
    jobs = sub.add_parser(
        "jobs",
        help="list crawl and sync jobs, or show one with its errors",
        description="List crawl and sync jobs, newest first; with a job id, show that job: its counters, "
        "error, warnings and the pages that failed.",
        epilog="examples:\n  archivist jobs\n  archivist jobs --status running --json\n  archivist jobs JOB_ID",
    )
    jobs.add_argument("id", nargs="?", default=None, metavar="JOB_ID", help="show this job with its failed pages")
    jobs.add_argument("--status", default=None, choices=JOB_STATUSES, help="only jobs in this state")
    jobs.add_argument("--json", action="store_true", help="print JSON for scripts")
    worker = sub.add_parser(
        "worker",
        help="run a standalone crawl worker against the configured database",
        description="Run crawl and sync jobs from the shared queue until SIGINT/SIGTERM; running jobs are "
        "handed back to the queue on stop.",
        epilog="example:\n  DATABASE_URL=postgresql://... archivist worker --jobs 4",
    )
    worker.add_argument("--id", default=None, help="worker id (default: host:pid:random)")
    worker.add_argument("--jobs", type=int, default=2, metavar="N", help="jobs run at once (default: 2)")


async def follow(
    app: Archivist, job_id: Any, stop: asyncio.Event, show: Callable[[Any], Awaitable[None]], interval: float = 0.5
) -> tuple[Any, bool]:
    """Follow a job until it finishes or `stop` is set; returns the job and whether it was stopped."""
    waiting = asyncio.create_task(app.jobs.wait(job_id, math.inf, on_progress=show, interval=interval))
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiting, stopping):
            task.cancel()
        await asyncio.gather(waiting, stopping, return_exceptions=True)
    if waiting.done() and not waiting.cancelled() and waiting.exception() is None:
        job = waiting.result()
        await show(job)
        return job, False
    return await app.jobs.get(job_id), True


async def with_worker(app: Archivist, run: bool, body: Callable[[], Awaitable[Any]]) -> Any:
    """Run `body` beside an in-process worker (when `run`); the worker stops, handing jobs back, after it."""
    from services.app import run_worker

    worker_stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, worker_stop)) if run else None
    try:
        return await body()
    finally:
        worker_stop.set()
        if worker is not None:
            await asyncio.gather(worker, return_exceptions=True)


async def resolve_source_id(app: Archivist, source: str | None) -> str | None:
    if source is None:
        return None
    return str((await app.sources.resolve(source)).id)


async def cli_crawl(app: Archivist, args: argparse.Namespace, stop: asyncio.Event) -> None:
    started = await app.crawl.start(
        CrawlRequest(
            url=args.url,
            source_id=await resolve_source_id(app, args.source),
            title=args.title,
            source_must_exist=args.source_must_exist or None,
            recursive=False if args.single else None,
            max_depth=args.max_depth,
            max_pages=args.max_pages,
            include_patterns=args.include,
            exclude_patterns=args.exclude,
            scope=args.scope,
        )
    )
    for message in started.notes:
        note(message)
    if args.detach:
        say(f"queued crawl job {started.job.id}; follow it with: archivist jobs")
        reason = await app.jobs.waiting_reason(started.job)
        if reason:
            note(f"warning: {reason}")
        return
    with progress_bar("pages") as bar:
        task = bar.add_task("crawling", total=started.job.shown_params.max_pages, extra="")

        async def show(job: Any) -> None:
            embedding = job.embedding_progress()
            extra = f"{job.pages_failed} failed, {job.pages_pending} pending" + (f"; {embedding}" if embedding else "")
            total = job.pages_crawled if job.finished else job.shown_params.max_pages  # a site may have fewer pages
            bar.update(task, completed=job.pages_crawled, total=total, extra=extra)

        job, stopped = await with_worker(app, not args.no_worker, lambda: follow(app, started.job.id, stop, show))
    if stopped:
        job = await app.jobs.get(started.job.id)
        note(f"stopped: crawl job {job.id} is {job.status}; `archivist worker` or `archivist serve` resumes it")
        return
    job = await app.jobs.get(job.id)  # with its most recent page errors
    report_job(job)
    exit_if_failed(job)


def report_job(job: Any, remark: Callable[[str], None] = note) -> None:
    """A finished job in a few lines: the outcome, then (as remarks, stderr by default) its error,
    warnings and the pages that failed."""
    say(
        f"{job.shown_kind} {job.id}: {job.status} — {job.pages_crawled} pages ({job.documents_created} new, "
        f"{job.documents_updated} updated, {job.documents_unchanged} unchanged), {job.pages_failed} failed, "
        f"{job.pages_skipped} skipped"
    )
    if job.status in WARNING_STATUSES:
        remark(f"warning: {job.shown_kind} {job.id} completed with errors: {job.pages_failed} failed (listed below)")
    embedding = job.embedding_progress()
    if embedding:
        say(f"searchable by keyword now; {embedding}")
    for message in [job.error, *job.warnings]:
        if message:
            remark(message)
    for error in job.recent_errors:
        remark(f"failed: {error.url}: {error.error}")
    if job.pages_failed > len(job.recent_errors):
        remark(f"({job.pages_failed - len(job.recent_errors)} more failed pages not shown)")


def exit_if_failed(job: Any) -> None:
    """A job that failed ends the command with exit code 1, naming the job and the next step."""
    if job.status == "failed":
        fail(
            f"{job.shown_kind} {job.id} failed: {job.error or 'see the errors above'}",
            f"Fix the cause, then run it again; `archivist jobs {job.id}` shows it again.",
        )


async def all_jobs(app: Archivist, status: str | None) -> list[Any]:
    items, page_no = [], 1
    while True:
        page = await app.jobs.list(status, None, page_no, 20)
        items.extend(page.items)
        if not page.has_more:
            return items
        page_no += 1


async def cli_jobs(app: Archivist, args: argparse.Namespace) -> None:
    if args.id:
        job = await app.jobs.get(args.id)
        if args.json:
            print_json(job)
        else:
            show_job(job)
        return
    jobs = await all_jobs(app, args.status)
    if args.json:  # a listing carries no page errors: `archivist jobs ID --json` has them
        print_json([j.model_dump(mode="json", exclude={"recent_errors"}) for j in jobs])
        return
    if not jobs:
        say("No jobs yet. Start one with: archivist crawl URL")
        return
    rows = [
        [j.id, j.shown_kind, j.status, j.pages_crawled, j.pages_failed, when(j.created_at), j.shown_params.url]
        for j in jobs
    ]
    print_table(["id", "kind", "status", "pages", "failed", "created", "url"], rows, right=["pages", "failed"])
    if any(j.pages_failed or j.status == "failed" for j in jobs):
        note("Show a job with its failed pages: archivist jobs JOB_ID")


def show_job(job: Any) -> None:
    say(f"{job.shown_kind} {job.id}: {job.status}\nurl: {job.shown_params.url}\nsource: {job.source_id or '(removed)'}")
    say(f"created {when(job.created_at)}, started {when(job.started_at)}, finished {when(job.completed_at)}")
    report_job(job, remark=say)  # what was asked for: on stdout


async def cli_worker(settings: Settings, args: argparse.Namespace, stop: asyncio.Event) -> None:
    from services.app import run_standalone_worker

    await run_standalone_worker(settings, args.id, args.jobs, stop=stop)
