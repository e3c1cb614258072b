"""What jobs, sync and workers are given: the services of the running knowledge base, as a Protocol.

They receive the object `services.app` builds, but never import that module (it imports them)."""

from __future__ import annotations

from typing import Any, Protocol

from services.access.audit import AuditService
from services.access.profiles import ProfileService
from services.access.ratelimit import RateLimiter
from services.access.tokens import TokenService
from services.database import Database
from services.documents import DocumentService
from services.embeddings.base import Embedder
from services.reranking.base import Reranker
from services.search import SearchService
from services.settings import Settings
from services.sources import SourceService


class AppServices(Protocol):
    """The service container's surface (services.app.Archivist satisfies it)."""

    settings: Settings
    db: Database
    embedder: Embedder
    sources: SourceService
    documents: DocumentService
    search: SearchService
    profiles: ProfileService
    tokens: TokenService
    audit: AuditService
    ratelimit: RateLimiter

    @property
    def jobs(self) -> Any: ...  # services.jobs.JobService

    @property
    def sync(self) -> Any: ...  # services.sync.SyncService

    def reranker(self) -> Reranker: ...

    async def close(self) -> None: ...
