"""Crawl and sync jobs as MCP tasks: the `io.modelcontextprotocol/tasks` extension (SEP-2663, 2026-07-28).

Through the SDK's extension API (`mcp.server.extension.Extension`):
- `intercept_tool_call`: a `crawl_website` start, recrawl or sync from a client that declares the
  extension on that request returns the queued job as a task (`resultType: "task"`, `taskId` = the
  job id, a random UUID); a job already finished (wait_seconds) returns its ordinary result.
- `tasks/get`: the job as a task; once it ends, `result` holds what `crawl_website(action="status")`
  returns (`completed` for a completed or failed job: a failed crawl is a tool outcome, not a JSON-RPC
  error), and a cancelled job is `cancelled`.
- `tasks/update`: jobs ask for no input, so an update is acknowledged and ignored.
- `tasks/cancel`: cancels the job (acknowledged at once; the worker stops within seconds).

Every tasks/* request passes the access gate (AccessMiddleware), so a task outside the caller's
scope reads as not found. Clients that do not declare the extension keep polling with `status`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolRequestParams, RequestParams
from pydantic import ConfigDict

from models.jobs import CrawlJob
from services.core.errors import ServiceError
from tools.common import success
from tools.crawl_website import job_message, job_payload

TASKS = "io.modelcontextprotocol/tasks"
MODERN = frozenset({"2026-07-28"})
MISSING_CAPABILITY = -32021
POLL_INTERVAL_MS = 2000
TASK_ACTIONS = frozenset({"start", "recrawl", "sync"})
STATUS = {
    "queued": "working",
    "running": "working",
    "completed": "completed",
    "completed_with_errors": "completed",
    "failed": "completed",
}


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    taskId: str  # noqa: N815 (the wire name)


def declares_tasks(ctx: Any) -> bool:
    capabilities = getattr(ctx.session, "client_capabilities", None)
    extensions = getattr(capabilities, "extensions", None) or {}
    return TASKS in extensions


def stamp(value: Any) -> str:
    return value.isoformat() if value is not None else ""


def task_view(job: CrawlJob) -> dict[str, Any]:
    """The job as a DetailedTask (flat, camelCase on the wire)."""
    status = STATUS.get(job.status, "cancelled")
    updated = job.completed_at or job.heartbeat_at or job.started_at or job.created_at
    view: dict[str, Any] = {
        "taskId": str(job.id),
        "status": status,
        "statusMessage": job_message(job),
        "createdAt": stamp(job.created_at),
        "lastUpdatedAt": stamp(updated),
        "ttlMs": None,  # jobs are kept until deleted
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if status == "completed":
        view["result"] = success(job_payload(job, [])).model_dump(mode="json", by_alias=True, exclude_none=True)
    return view


class JobTasks(Extension):
    """Serves the tasks extension over Archivist's crawl and sync jobs (see the module docstring)."""

    identifier = TASKS

    def __init__(self, server: Any) -> None:
        self.server = server  # read lazily: the runtime is attached after construction

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskParams, self.get, MODERN),
            MethodBinding("tasks/update", TaskParams, self.update, MODERN),
            MethodBinding("tasks/cancel", TaskParams, self.cancel, MODERN),
        )

    async def intercept_tool_call(self, params: CallToolRequestParams, ctx: Any, call_next: Any) -> Any:
        action = (params.arguments or {}).get("action", "start")
        if params.name != "crawl_website" or action not in TASK_ACTIONS or not declares_tasks(ctx):
            return await call_next(ctx)
        result = await call_next(ctx)
        body = getattr(result, "structured_content", None) or {}
        job = body.get("crawl_job") if body.get("success") else None
        if not job or job.get("status") not in ("queued", "running"):
            return result  # refused, or already finished: the ordinary result
        created = {
            "taskId": str(job["id"]),
            "status": "working",
            "statusMessage": body.get("message"),
            "createdAt": str(job.get("created_at") or ""),
            "lastUpdatedAt": str(job.get("started_at") or job.get("created_at") or ""),
        }
        return {"resultType": "task", **created, "ttlMs": None, "pollIntervalMs": POLL_INTERVAL_MS}

    async def job(self, ctx: Any, params: TaskParams) -> CrawlJob:
        if not declares_tasks(ctx):
            required: dict[str, Any] = {"requiredCapabilities": {"extensions": {TASKS: {}}}}
            raise MCPError(MISSING_CAPABILITY, "Missing required client capability", required)
        try:
            app = await self.server.runtime.get()
            job: CrawlJob = await app.jobs.get(params.taskId)
            return job
        except ServiceError as exc:  # unknown, malformed or out of scope: all read as not found
            raise MCPError(INVALID_PARAMS, f"Failed to retrieve task: {exc.message}") from None

    async def get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        return task_view(await self.job(ctx, params))

    async def update(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        await self.job(ctx, params)
        return {}

    async def cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        job = await self.job(ctx, params)
        app = await self.server.runtime.get()
        try:
            await app.jobs.cancel(str(job.id))
        except ServiceError as exc:  # e.g. a read-only token: the job is not cancelled
            raise MCPError(INVALID_PARAMS, f"Failed to cancel task: {exc.message}") from None
        return {}
