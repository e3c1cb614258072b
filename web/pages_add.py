"""Console pages that add knowledge (paste, upload, crawl) and follow crawl jobs (live progress, cancel)."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from models.jobs import JOB_STATUSES, CrawlJob, CrawlRequest
from services.core.errors import InvalidArgument
from services.crawl.params import SCOPES
from services.documents import check_metadata
from services.parsers import supported_extensions
from services.parsers.isolation import parse_file
from web.core import Console, form_int, form_text, query_int

PER_PAGE = 20


def job_json(job: CrawlJob) -> dict[str, Any]:
    return {
        "id": str(job.id),
        "status": job.status,
        "finished": job.finished,
        "cancel_requested": job.cancel_requested,
        **{k: v for k, v in job.counters().items() if k != "skipped_by_reason"},
        "error": job.error,
        "recent_errors": [e.model_dump() for e in job.recent_errors[:5]],
        "embedding_progress": job.embedding_progress() or "",
    }


def lines(value: str) -> list[str] | None:
    items = [v.strip() for v in value.splitlines() if v.strip()]
    return items or None


def routes(console: Console) -> list[Route]:
    async def add(request: Request) -> Response:
        app = await console.app()
        all_sources = await console.source_choices()
        return console.render(
            request,
            "add.html",
            sources=all_sources,
            max_mb=app.settings.max_file_mb,
            scopes=SCOPES,
            extensions=supported_extensions(),
            settings=app.settings,
        )

    async def target_source(request: Request) -> Any:
        app = await console.app()
        source_id, new_title = form_text(request, "source_id"), form_text(request, "new_source").strip()
        sid, _ = await app.documents.resolve_source(source_id or None, new_title or None)
        return sid

    async def add_text(request: Request) -> Response:
        app = await console.app()
        content = form_text(request, "content")
        if not content.strip():
            raise InvalidArgument("The text is empty.", "Paste some text or markdown.")
        sid = await target_source(request)
        title = form_text(request, "title").strip() or None
        result = await app.documents.create_from_text(sid, content, title, form_text(request, "url").strip() or None)
        return RedirectResponse(f"/documents/{result.document.id}?added={result.status}", 303)

    async def add_file(request: Request) -> Response:
        app = await console.app()
        upload = request.state.form.get("file")
        if not isinstance(upload, UploadFile) or not upload.filename:
            raise InvalidArgument("No file was chosen.", "Choose a file to upload.")
        limit = app.settings.max_file_bytes
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise InvalidArgument(
                f"{upload.filename} is over the {app.settings.max_file_mb:g} MB upload limit.",
                "Split the file, or raise ARCHIVIST_MAX_FILE_MB.",
            )
        name = PurePath(upload.filename).name
        parsed = await parse_file(data, PurePath(name), app.settings)  # a worker process, with limits
        if not parsed.content.strip():
            raise InvalidArgument(f"{name} has no text content.", "Upload a file with text in it.")
        sid = await target_source(request)
        title = (form_text(request, "title").strip() or parsed.title or name)[:500]
        meta = check_metadata({"file_name": name, "file_size": len(data), **parsed.metadata})
        result = await app.documents.ingest(sid, title, parsed.content, parsed.document_type, None, meta)
        return RedirectResponse(f"/documents/{result.document.id}?added={result.status}", 303)

    async def add_crawl(request: Request) -> Response:
        app = await console.app()
        started = await app.crawl.start(
            CrawlRequest(
                url=form_text(request, "url").strip(),
                source_id=form_text(request, "source_id") or None,
                title=form_text(request, "new_source").strip() or None,
                recursive=form_text(request, "recursive") == "on",
                max_depth=form_int(request, "max_depth", 2),
                max_pages=form_int(request, "max_pages", 20),
                include_patterns=lines(form_text(request, "include")),
                exclude_patterns=lines(form_text(request, "exclude")),
                scope=form_text(request, "scope", "same-host"),
            )
        )
        return RedirectResponse(f"/jobs/{started.job.id}", 303)

    async def jobs(request: Request) -> Response:
        app = await console.app()
        status = request.query_params.get("status") or None
        status = status if status in JOB_STATUSES else None
        page = query_int(request, "page", 1)
        listed = await app.jobs.list(status, None, page, PER_PAGE)
        titles = {str(s["id"]): s["title"] for s in await console.source_choices()}
        return console.render(
            request, "jobs.html", jobs=listed, status_filter=status or "", statuses=JOB_STATUSES, titles=titles
        )

    async def job(request: Request) -> Response:
        app = await console.app()
        current = await app.jobs.get(request.path_params["job_id"])
        src = await app.sources.get(current.source_id) if current.source_id else None  # None: removed, empty
        return console.render(request, "job.html", job=current, source=src)

    async def job_status(request: Request) -> Response:
        app = await console.app()
        current = await app.jobs.get(request.path_params["job_id"])
        return JSONResponse(job_json(current), headers={"Cache-Control": "no-store"})

    async def cancel(request: Request) -> Response:
        app = await console.app()
        cancelled, _ = await app.jobs.cancel(request.path_params["job_id"], 0)
        return RedirectResponse(f"/jobs/{cancelled.id}", 303)

    async def recrawl(request: Request) -> Response:
        app = await console.app()
        started = await app.crawl.recrawl(CrawlRequest(job_id=request.path_params["job_id"]))
        return RedirectResponse(f"/jobs/{started.job.id}", 303)

    return [
        console.route("/add", add),
        console.route("/add/text", add_text, methods=["POST"], write=True, body="text"),
        console.route("/add/file", add_file, methods=["POST"], write=True, body="file"),
        console.route("/add/crawl", add_crawl, methods=["POST"], write=True),
        console.route("/jobs", jobs),
        console.route("/jobs/{job_id}", job),
        console.route("/jobs/{job_id}/status", job_status),
        console.route("/jobs/{job_id}/cancel", cancel, methods=["POST"], write=True),
        console.route("/jobs/{job_id}/recrawl", recrawl, methods=["POST"], write=True),
    ]
