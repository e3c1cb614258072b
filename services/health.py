"""Health report (database, models, worker, queue) for `archivist doctor` and HTTP `/healthz`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from services.core.errors import service_error_from
from services.jobs.registry import live_workers
from services.jobs.sources import status_counts

if TYPE_CHECKING:
    from services.access.audit import AuditService
    from services.core.database import Database
    from services.core.settings import Settings
    from services.embeddings.base import Embedder


class HealthApp(Protocol):
    """What the report reads of the services (services.app.Archivist)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Database: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def audit(self) -> AuditService: ...


class StartingServices(Protocol):
    """A server's services while they start (services.app.Runtime): the task that opens them."""

    @property
    def _task(self) -> asyncio.Task[HealthApp] | None: ...


async def database_state(app: HealthApp) -> dict[str, Any]:
    """Round-trip to the database (2 s at most), plus the embedded server's supervision state."""
    state: dict[str, Any] = {"embedded": not app.settings.database_url}
    supervisor = getattr(app.db, "supervisor", None)
    if supervisor is not None:
        state.update(supervisor.state())
    try:
        await asyncio.wait_for(app.db.pool.fetchval("SELECT 1"), 2)
        state["ok"] = True
    except Exception as exc:
        mapped = service_error_from(exc)
        state.update(ok=False, error=mapped.message if mapped else f"{type(exc).__name__}: {exc}"[:300])
    return state


async def queue_state(app: HealthApp) -> dict[str, Any]:
    try:
        counts = await asyncio.wait_for(status_counts(app.db.pool), 2)
    except Exception:
        return {"ok": False}
    return {"ok": True, **counts}


async def live_worker_ids(app: HealthApp) -> list[str]:
    """The workers running now on this database (services/jobs/registry.py), any process."""
    try:
        return [w.id for w in await asyncio.wait_for(live_workers(app.db.pool, app.settings), 2)]
    except Exception:
        return []


async def report(app: HealthApp) -> dict[str, Any]:
    """The whole report; `ok` is true when the database answers."""
    database = await database_state(app)
    queue = await queue_state(app) if database["ok"] else {"ok": False}
    return {
        "ok": database["ok"],
        "database": database,
        "models": {"embedding_model": app.embedder.name, "embedding_dim": app.embedder.dim},
        "worker": {
            "in_process": bool(app.settings.run_worker),
            "running_jobs": queue.get("running", 0),
            "live_workers": await live_worker_ids(app) if database["ok"] else [],
        },
        "queue": queue,
        "audit": app.audit.stats(),
    }


async def runtime_report(runtime: StartingServices) -> tuple[dict[str, Any], int]:
    """Report for a server whose services may still be starting: (body, HTTP status)."""
    task = getattr(runtime, "_task", None)
    if task is None or not task.done():
        return {"ok": False, "status": "starting"}, 503
    if task.cancelled() or task.exception() is not None:
        exc = None if task.cancelled() else task.exception()
        return {"ok": False, "status": "failed", "error": f"{type(exc).__name__}: {exc}"[:300]}, 503
    body = await report(task.result())
    return body, 200 if body["ok"] else 503
