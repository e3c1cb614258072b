"""The service container: one place that builds the database, models and services."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Mapping
from functools import partial

from services.access.audit import AuditService
from services.access.grants import GrantService
from services.access.open_state import remember_secured
from services.access.profiles import ProfileService
from services.access.ratelimit import RateLimiter
from services.access.tokens import TokenService
from services.code.files import CodeFiles
from services.code.grep import CodeSearch
from services.code.symbol_search import SymbolSearch
from services.core.database import Database
from services.core.errors import ServiceError, Unavailable
from services.core.memory import limit_malloc_arenas
from services.core.settings import Settings
from services.crawl.service import CrawlService
from services.documents import DocumentService
from services.embeddings import create_embedder, gate
from services.embeddings.base import Embedder
from services.jobs.queue import JobQueue
from services.jobs.run import RunnerFactory
from services.jobs.worker import DEFAULT_CONCURRENT_JOBS, Chore, Worker
from services.refresh import SourceRefresh
from services.reranking import create_reranker
from services.reranking.base import Reranker
from services.search import SearchService
from services.search.keyword_index import match_keyword_index
from services.search.query import SearchQueries
from services.search.warm import warm_search_indexes
from services.sources.service import SourceService
from services.sync import SyncService
from services.sync.git import GitService

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
        self.code = CodeSearch(db)  # grep over the line index of synced code (services/code)
        self.code_files = CodeFiles(db)  # a source's files by path and line
        self.symbols = SymbolSearch(db)  # definitions, references, outlines of synced code (services/code)
        self.jobs = JobQueue(db, settings)  # every job of every kind
        self.crawl = CrawlService(db, settings, self.sources, self.jobs)
        self.sync = SyncService(db, settings, self.sources, self.jobs)  # folder sources
        self.git = GitService(db, settings, self.sources, self.jobs)  # git sources
        self.refresh = SourceRefresh(self.sources, self.crawl, self.sync, self.git)  # a source refreshed by its kind
        self.profiles = ProfileService(db)
        #: the one entry every edge searches through (a SearchQuery: profile, defaults, version)
        self.queries = SearchQueries(db, self.search, self.profiles, self.sources, embedder, settings)
        self.tokens = TokenService(db)
        self.grants = GrantService(db)  # identity-provider claims -> profiles (issue 20)
        self.audit = AuditService(
            db, write_timeout=settings.audit_write_timeout_seconds, enabled=settings.audit_enabled
        )
        self.ratelimit = RateLimiter(db, burst=settings.rate_burst)
        self._warming: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, settings: Settings, embedder: Embedder | None = None) -> Archivist:
        """Load the embedder (in a thread) and connect + migrate the database concurrently."""
        gate.background_nice = settings.embedding_background_nice
        limit_malloc_arenas()  # before the model's and the crawl's worker threads first allocate
        if embedder is None:
            embedder = await asyncio.to_thread(create_embedder, settings)
        db = Database(settings)
        await db.start(embedder.name, embedder.dim)
        await match_keyword_index(db, settings.keyword_ranking)  # the tsv GIN only for ts_rank
        if settings.oauth_issuer:  # an identity provider secures this knowledge base for good (sql/033)
            await remember_secured(db.pool, "identity provider")
        return cls(settings, db, embedder)

    def reranker(self) -> Reranker:
        with self._reranker_lock:
            if self._reranker is None:
                self._reranker = create_reranker(self.settings)
            return self._reranker

    def start_warming(self) -> None:
        """Read the search indexes once in the background (services/search/warm.py); the server only."""
        if self._warming is None:
            self._warming = asyncio.create_task(self._warm(), name="archivist-warm")

    async def _warm(self) -> None:
        try:
            await warm_search_indexes(self.db)
        except Exception as exc:  # warming is an optimisation: the queries warm the cache themselves
            logger.warning("warm start failed: %s: %s", type(exc).__name__, exc)

    async def close(self) -> None:
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warming
        await self.crawl.close()
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
            self._task = asyncio.create_task(self._open(), name="archivist-start")

    async def _open(self) -> Archivist:
        app = await Archivist.open(self.settings, self.embedder)
        if self.settings.warm_start:
            app.start_warming()
        return app

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

    async def drain_audit(self) -> None:
        """First step of a stop: a stdio client terminates the server 2 s after closing its input, while
        stopping the worker can take longer, so every call already answered is written before anything else."""
        app = self.ready()
        if app is not None:
            await app.audit.close()

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


def job_runners(app: Archivist) -> dict[str, RunnerFactory]:
    """The runner of each job kind, with only the services it uses: what a worker dispatches on."""
    from services.crawl.runner import CrawlRunner, CrawlTools
    from services.sync.git.runner import GitSyncRunner
    from services.sync.runner import SyncRunner, SyncTools

    crawl = CrawlTools(app.settings, app.db.pool, app.documents, app.crawl.throttle)
    sync = SyncTools(app.settings, app.db.pool, app.documents)
    return {
        "crawl": partial(CrawlRunner, queue=app.jobs, tools=crawl),
        "recrawl": partial(CrawlRunner, queue=app.jobs, tools=crawl),
        "sync": partial(SyncRunner, queue=app.jobs, tools=sync, folders=app.sync),
        "git": partial(GitSyncRunner, queue=app.jobs, tools=sync, repositories=app.git),
    }


def worker_chores(app: Archivist) -> Mapping[str, Chore]:
    """What every worker (the server's and `archivist worker`) does beside jobs: embed pending chunks
    (services/documents/backlog.py), flag chunks stored before flags existed (services/flags), write
    the symbols of code stored before the symbol table (services/code/symbol_backfill.py) and fold new
    keyword postings into blocks (services/search/merge.py; one merge at a time across workers) and
    rebuild grep's trigram index after large syncs (services/code/trigram_upkeep.py; one at a time)."""
    from services.code.symbol_backfill import run_symbol_backfill
    from services.code.trigram_upkeep import TrigramUpkeep
    from services.flags.store import run_scanner
    from services.search.merge import PostingsMerger

    chores: dict[str, Chore] = {}
    lanes = app.settings.embedding_backlog_lanes
    if lanes > 0:
        chores["embedding-backlog"] = partial(app.documents.backlog.run, lanes=lanes)
    chores["flag-scan"] = partial(run_scanner, app.db)
    chores["symbol-backfill"] = partial(run_symbol_backfill, app.db)
    chores["postings-merge"] = PostingsMerger(app.db, app.settings.bm25_merge_postings).run
    chores["trigram-upkeep"] = TrigramUpkeep(app.db).run
    return chores


async def run_worker(
    app: Archivist, stop: asyncio.Event, worker_id: str | None = None, *, concurrent_jobs: int = DEFAULT_CONCURRENT_JOBS
) -> None:
    """Claim and run jobs of every kind until `stop` is set (services/jobs/worker.py)."""
    worker = Worker(
        app.jobs,
        job_runners(app),
        worker_id,
        poll_seconds=app.settings.job_poll_seconds,
        concurrent_jobs=concurrent_jobs,
    )
    await worker.run(stop, worker_chores(app))


async def run_standalone_worker(
    settings: Settings, worker_id: str | None = None, concurrent_jobs: int = 2, stop: asyncio.Event | None = None
) -> None:
    """`archivist worker`: open the knowledge base and run a worker until `stop` is set (by default: until
    SIGINT/SIGTERM); running jobs go back to the queue, then the knowledge base closes."""
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
