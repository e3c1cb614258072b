"""The service container: one place that builds the database, models and services."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from typing import Any

from services.access.audit import AuditService
from services.access.grants import GrantService
from services.access.profiles import ProfileService
from services.access.ratelimit import RateLimiter
from services.access.tokens import TokenService
from services.database import Database
from services.documents import DocumentService
from services.embeddings import create_embedder, gate
from services.embeddings.base import Embedder
from services.errors import ServiceError, Unavailable
from services.memory import limit_malloc_arenas
from services.reranking import create_reranker
from services.reranking.base import Reranker
from services.search import SearchService
from services.settings import Settings
from services.sources import SourceService

logger = logging.getLogger(__name__)


class Archivist:
    """Everything a tool, the CLI or a worker needs, wired once."""

    def __init__(self, settings: Settings, db: Database, embedder: Embedder) -> None:
        self.settings = settings
        self.db = db
        self.embedder = embedder
        self._reranker: Reranker | None = None
        self._reranker_lock = threading.Lock()
        self.sources = SourceService(db)
        self.documents = DocumentService(db, self.sources, embedder, settings)
        self.search = SearchService(db, self.sources, embedder, settings, self.reranker)
        self._jobs: Any = None
        self.profiles = ProfileService(db)
        self.tokens = TokenService(db)
        self.grants = GrantService(db)  # identity-provider claims -> profiles (issue 20)
        self.audit = AuditService(
            db, write_timeout=settings.audit_write_timeout_seconds, enabled=settings.audit_enabled
        )
        self.ratelimit = RateLimiter(db, burst=settings.rate_burst)

    @classmethod
    async def open(cls, settings: Settings, embedder: Embedder | None = None) -> Archivist:
        """Load the embedder (in a thread) and connect + migrate the database concurrently."""
        gate.background_nice = settings.embedding_background_nice
        limit_malloc_arenas()  # before the model's and the crawl's worker threads first allocate
        if embedder is None:
            embedder = await asyncio.to_thread(create_embedder, settings)
        db = Database(settings)
        await db.start(embedder.name, embedder.dim)
        return cls(settings, db, embedder)

    @property
    def jobs(self) -> Any:
        """Crawl jobs (services.jobs.JobService), built on first use."""
        if self._jobs is None:
            from services.jobs import JobService

            self._jobs = JobService(self)
        return self._jobs

    @property
    def sync(self) -> Any:
        """Folder sources (services.sync.SyncService), built on first use."""
        if getattr(self, "_sync", None) is None:
            from services.sync import SyncService

            self._sync = SyncService(self)
        return self._sync

    @property
    def git(self) -> Any:
        """Git sources (services.sync.git.GitService), built on first use."""
        if getattr(self, "_git", None) is None:
            from services.sync.git import GitService

            self._git = GitService(self.db, self.settings, self.sources, self.jobs)
        return self._git

    def reranker(self) -> Reranker:
        with self._reranker_lock:
            if self._reranker is None:
                self._reranker = create_reranker(self.settings)
            return self._reranker

    async def close(self) -> None:
        if self._jobs is not None:
            await self._jobs.close()
        await self.audit.close()
        await self.documents.backlog.close()
        await self.db.close()


class Runtime:
    """Starts `Archivist` in the background so the MCP handshake never waits for models or the
    database; tool calls wait for it (up to `wait_seconds`) via `get()`."""

    def __init__(self, settings: Settings, wait_seconds: float = 120.0, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.wait_seconds = wait_seconds
        self.embedder = embedder
        self._task: asyncio.Task[Archivist] | None = None

    def start(self) -> None:
        if self._task is None:
            opening = Archivist.open(self.settings, self.embedder)
            self._task = asyncio.create_task(opening, name="archivist-start")

    async def get(self) -> Archivist:
        self.start()
        assert self._task is not None
        if self._task.done() and not self._task.cancelled() and self._task.exception() is None:
            return self._task.result()  # started: no timer and no task per call (three calls per tool call)
        try:
            return await asyncio.wait_for(asyncio.shield(self._task), self.wait_seconds)
        except TimeoutError:
            raise Unavailable(
                "The knowledge base is still starting (loading models, opening the database).",
                "Retry in a few seconds.",
            ) from None
        except ServiceError:
            raise
        except Exception as exc:
            logger.exception("start-up failed")
            raise Unavailable(
                f"The knowledge base failed to start: {type(exc).__name__}: {str(exc)[:300]}",
                "Check the server's log (stderr) and its DATABASE_URL / ARCHIVIST_* settings, then restart it.",
                retryable=False,
            ) from exc

    def ready(self) -> Archivist | None:
        """The started services, or None while starting (or after a failed start); never waits."""
        task = self._task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result()

    async def close(self) -> None:
        if self._task is None:
            return
        if not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                return
        elif self._task.exception() is None:
            await self._task.result().close()


async def run_standalone_worker(
    settings: Settings, worker_id: str | None = None, concurrent_jobs: int = 2, stop: asyncio.Event | None = None
) -> None:
    """`archivist worker`: open the knowledge base and run a worker until `stop` is set (by default: until
    SIGINT/SIGTERM); running jobs go back to the queue, then the knowledge base closes."""
    from services.worker import run_worker

    own_signals = stop is None
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if own_signals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
    app = await Archivist.open(settings)
    try:
        await run_worker(app, stop, worker_id, concurrent_jobs=concurrent_jobs)
    finally:
        if own_signals:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        await app.close()
