"""MCP tool: crawl_website (background crawl jobs: start, status, list, cancel, recrawl)."""

from __future__ import annotations

import logging
from functools import partial
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult

from models.jobs import CrawlJob, CrawlRequest, GitSyncRequest, StartedJob, SyncRequest
from services.app import Archivist, Runtime
from services.core.errors import InvalidArgument
from tools.arguments import ToolArguments, tool_function
from tools.common import cut, dispatch, page_fields
from tools.schemas import CrawlReply

logger = logging.getLogger(__name__)
NAME = "crawl_website"
#: one line: in `tools/list` a line break costs two characters (`\n`), a space one
DESCRIPTION = (
    "start: url; into source_id or a source by title (default: host); follows links (recursive=false: one"
    " page) to max_depth (max 5); max_pages (max 100); include/exclude_patterns. Login: headers/cookies"
    " {name: 'env:VAR'}, auth_hosts. status: job_id, wait_seconds (max 30). list: status, source_id."
    " cancel: job_id. recrawl: source_id, job_id or url. sync: folder_path, git_url (ref, auth_env: token"
    " env var, browse_url with {commit} {path}) or source_id."
)


class CrawlArguments(ToolArguments):
    action: Literal["start", "status", "list", "cancel", "recrawl", "sync"] = "start"
    url: str | None = None
    job_id: str | None = None
    source_id: str | None = None
    title: str | None = None
    source_must_exist: bool | None = None  # start: a title naming no source is NOT_FOUND (docs/tools.md)
    recursive: bool | None = None
    max_depth: int | None = None
    max_pages: int | None = None
    include_patterns: list[str] | None = None
    exclude_patterns: list[str] | None = None
    scope: Literal["same-host", "same-domain", "under-path"] | None = None
    headers: dict[str, Any] | None = None
    cookies: dict[str, Any] | None = None
    auth_hosts: list[str] | None = None
    folder_path: str | None = None
    git_url: str | None = None
    ref: str | None = None
    auth_env: str | None = None
    browse_url: str | None = None
    wait_seconds: float = 0
    status: str | None = None  # one of JOB_STATUSES (services/jobs checks it; the enum would crowd tools/list)
    page: int = 1
    per_page: int = 10


ARGUMENTS = CrawlArguments
MAX_WAIT_SECONDS = 30.0
SHOWN_ERRORS = 5
ERROR_TEXT_LIMIT = 300
WARNING_LIMIT = 300


def check_wait(wait_seconds: float | None, notes: list[str]) -> float:
    """wait_seconds in [0, 30]; larger values are capped (with a note)."""
    wait = float(wait_seconds or 0)
    if wait < 0:
        raise InvalidArgument(f"wait_seconds must be 0 or more (got {wait_seconds}).", "Use wait_seconds=0 to 30.")
    if wait > MAX_WAIT_SECONDS:
        notes.append(f"wait_seconds {wait_seconds} was capped at {MAX_WAIT_SECONDS:.0f}.")
        wait = MAX_WAIT_SECONDS
    return wait


def job_view(job: CrawlJob, with_errors: bool = True) -> dict[str, Any]:
    """A job as agents see it: status, counters, timestamps, last errors (each cut)."""
    params = job.shown_params  # every kind shows the shape agents have always seen
    url, url_cut = cut(params.url, ERROR_TEXT_LIMIT)
    error, error_cut = cut(job.error, ERROR_TEXT_LIMIT)
    view: dict[str, Any] = {
        "id": job.id,
        "source_id": job.source_id,
        "kind": job.shown_kind,
        "status": job.status,
        "url": url,
        "max_pages": params.max_pages,  # as the tools-spec's crawl_job shows them (also in params)
        "recursive": params.recursive,
        "params": params.model_dump(exclude={"url", "kind"}),
        **job.counters(),
        "created_at": job.created_at,
        "started_at": job.started_at,
        "completed_at": job.completed_at,
        "error": error,
        "warnings": [cut(w, WARNING_LIMIT)[0] for w in job.warnings[:SHOWN_ERRORS]],
        "truncated": url_cut or error_cut or len(job.warnings) > SHOWN_ERRORS,
    }
    if job.cancel_requested and not job.finished:
        view["cancel_requested"] = True
    if job.shown_kind in ("recrawl", "sync") and job.started_at is not None:  # what it changed (issue 21, point 5)
        hint = f"manage_source(action='changes', job_id='{job.id}')"
        view["changes"] = {"since": job.started_at, "hint": hint}
    if with_errors:
        view["recent_errors"] = [
            {
                "url": cut(e.url, ERROR_TEXT_LIMIT)[0],
                "error": cut(e.error, ERROR_TEXT_LIMIT)[0],
                "http_status": e.http_status,
            }
            for e in job.recent_errors[:SHOWN_ERRORS]
        ]
    return view


def job_message(job: CrawlJob) -> str:
    """Where the job stands and what to call next; while its chunks wait for embeddings, how far that is."""
    embedding = job.embedding_progress()
    said = stage_message(job)
    return f"{said} Semantic search is still filling in: {embedding}." if embedding else said


def stage_message(job: CrawlJob) -> str:
    """One sentence on where the job stands and what to call next."""
    if job.shown_kind == "sync":
        return sync_message(job)
    counts = (
        f"{job.pages_crawled} pages crawled ({job.documents_created} new, {job.documents_updated} updated, "
        f"{job.documents_unchanged} unchanged, {job.documents_deleted} deleted), {job.pages_failed} failed, "
        f"{job.pages_skipped} skipped"
    )
    if job.status in ("queued", "running"):
        return (
            f"Crawl {job.status}: {counts}, {job.pages_pending} pending. Follow it with "
            f"crawl_website(action='status', job_id='{job.id}', wait_seconds=30)."
        )
    if job.status == "completed":
        return (
            f"Crawl completed: {counts}. Search it with search_knowledge_base(query=..., source_id='{job.source_id}')."
        )
    if job.status == "completed_with_errors":
        return (
            f"Crawl completed with errors: {counts}; see recent_errors. The pages crawled are searchable "
            f"(source_id='{job.source_id}'); retry the failed ones with "
            f"crawl_website(action='recrawl', job_id='{job.id}')."
        )
    if job.status == "cancelled":
        return f"Crawl cancelled: {counts}. Pages crawled before the cancel stay in the source."
    return (
        f"Crawl failed: {job.error or 'see recent_errors'}. Fix the cause, then "
        f"crawl_website(action='recrawl', job_id='{job.id}')."
    )


def sync_message(job: CrawlJob) -> str:
    counts = (
        f"{job.pages_crawled} files ({job.documents_created} new, {job.documents_updated} updated, "
        f"{job.documents_unchanged} unchanged), {job.documents_deleted} deleted, {job.pages_failed} failed"
    )
    if job.status in ("queued", "running"):
        return (
            f"Sync {job.status}: {counts}, {job.pages_pending} pending. Follow it with "
            f"crawl_website(action='status', job_id='{job.id}', wait_seconds=30)."
        )
    if job.status == "completed":
        return (
            f"Sync completed: {counts}. Search it with search_knowledge_base(query=..., source_id='{job.source_id}')."
        )
    if job.status == "completed_with_errors":
        return (
            f"Sync completed with errors: {counts}; see recent_errors. The files synced are searchable "
            f"(source_id='{job.source_id}')."
        )
    if job.status == "cancelled":
        return f"Sync cancelled: {counts}. Files synced before the cancel stay in the source."
    return f"Sync failed: {job.error or 'see recent_errors'}. Fix the cause, then crawl_website(action='sync', ...)."


def job_payload(job: CrawlJob, notes: list[str]) -> dict[str, Any]:
    payload: dict[str, Any] = {"crawl_job": job_view(job), "message": job_message(job)}
    if notes:
        payload["notes"] = notes
    return payload


class ProgressReporter:
    """Sends MCP progress notifications (only when the client asked, and only when progress grew)."""

    def __init__(self, ctx: Context | None) -> None:
        self.ctx = ctx
        self.last: float = -1.0

    async def __call__(self, job: CrawlJob) -> None:
        if self.ctx is None:
            return
        done = float(job.pages_crawled + job.pages_failed + job.pages_skipped)
        if done <= self.last:
            return
        self.last = done
        try:
            await self.ctx.report_progress(done, done + job.pages_pending, job_message(job))
        except Exception:  # progress is best effort: never fail the call over it
            logger.debug("progress notification failed", exc_info=True)


async def maybe_wait(app: Archivist, job: CrawlJob, wait: float, ctx: Context | None) -> CrawlJob:
    if wait <= 0 or job.finished:
        return job
    waited: CrawlJob = await app.jobs.wait(job.id, wait, ProgressReporter(ctx))
    return waited


async def started_payload(
    app: Archivist, started: StartedJob, args: CrawlArguments, ctx: Context | None
) -> dict[str, Any]:
    notes = list(started.notes)
    wait = check_wait(args.wait_seconds, notes)
    job = await maybe_wait(app, started.job, wait, ctx)
    return {**job_payload(job, notes), "source_id": job.source_id, "source_created": started.source_created}


def crawl_request(args: CrawlArguments) -> CrawlRequest:
    """The crawl the arguments ask for (start and recrawl), spelled once."""
    return CrawlRequest(**{name: getattr(args, name) for name in CrawlRequest.model_fields})


def sync_request(args: CrawlArguments) -> SyncRequest | GitSyncRequest:
    """The sync the arguments ask for: of the repository at git_url, else of folder_path or source_id."""
    model: type[SyncRequest | GitSyncRequest] = GitSyncRequest if args.git_url else SyncRequest
    return model(**{name: getattr(args, name) for name in model.model_fields})


async def start_crawl(app: Archivist, args: CrawlArguments, ctx: Context | None) -> dict[str, Any]:
    check_wait(args.wait_seconds, [])  # reject a bad wait before queueing anything
    started = await app.crawl.start(crawl_request(args))
    if args.recursive is False and (args.max_pages or 1) > 1:
        started.notes.append(
            f"Only the start page is crawled: recursive is false, and max_pages={args.max_pages} counts only "
            "for recursive crawls. Leave recursive out (or true) to follow links."
        )
    return await started_payload(app, started, args, ctx)


async def job_status(app: Archivist, args: CrawlArguments, ctx: Context | None) -> dict[str, Any]:
    notes: list[str] = []
    wait = check_wait(args.wait_seconds, notes)
    job = await maybe_wait(app, await app.jobs.get(args.job_id), wait, ctx)
    return job_payload(job, notes)


async def list_jobs(app: Archivist, args: CrawlArguments, ctx: Context | None) -> dict[str, Any]:
    source_id = (await app.sources.get(args.source_id)).id if args.source_id else None
    page = await app.jobs.list(args.status, source_id, args.page, args.per_page)
    return page_fields(page, "jobs", [job_view(j, with_errors=False) for j in page.items])


async def cancel_job(app: Archivist, args: CrawlArguments, ctx: Context | None) -> dict[str, Any]:
    job, was_active = await app.jobs.cancel(args.job_id)
    payload = job_payload(job, [])
    if not was_active:
        payload["message"] = f"The job had already finished ({job.status}); nothing to cancel."
    elif not job.finished:
        payload["message"] = "Cancel requested; the job's worker stops it within seconds. " + job_message(job)
    return payload


async def recrawl(app: Archivist, args: CrawlArguments, ctx: Context | None) -> dict[str, Any]:
    """Refresh a source: re-crawled, or synced when it is a folder or git source (the service decides)."""
    check_wait(args.wait_seconds, [])
    started = await app.refresh.refresh(crawl_request(args), sync_request(args))
    return await started_payload(app, started, args, ctx)


async def sync(app: Archivist, args: CrawlArguments, ctx: Context | None) -> dict[str, Any]:
    """Queue a sync of a folder or git source, binding folder_path or git_url first when given."""
    check_wait(args.wait_seconds, [])
    started = await app.refresh.sync(sync_request(args))
    return await started_payload(app, started, args, ctx)


ACTIONS = {
    "start": start_crawl,
    "status": job_status,
    "list": list_jobs,
    "cancel": cancel_job,
    "recrawl": recrawl,
    "sync": sync,
}


def register(mcp: MCPServer, runtime: Runtime) -> None:
    async def crawl_website(args: CrawlArguments, ctx: Context) -> CallToolResult:
        actions = {name: partial(handler, ctx=ctx) for name, handler in ACTIONS.items()}
        return await dispatch(NAME, runtime, actions, args)

    mcp.add_tool(
        tool_function(NAME, CrawlArguments, crawl_website, Annotated[CallToolResult, CrawlReply]),
        description=DESCRIPTION,  # no annotations: each hint is the spec's default (writes, deletes, the web)
    )
