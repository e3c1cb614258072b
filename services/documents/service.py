"""DocumentService: ingestion, reading, listing, updating and deleting documents."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from uuid import UUID

from services.core.database import Database
from services.core.errors import InvalidArgument
from services.core.settings import Settings
from services.documents.backlog import EmbeddingBacklog
from services.documents.change import ChangeMixin
from services.documents.files import FilesMixin
from services.documents.ingest import IngestMixin
from services.documents.read import ReadMixin
from services.documents.specs import SpecsMixin
from services.embeddings.base import Embedder
from services.sources.service import LIST_HINT as SOURCE_LIST_HINT
from services.sources.service import SourceService


class DocumentService(IngestMixin, FilesMixin, ReadMixin, ChangeMixin, SpecsMixin):
    """Documents of sources; every ingestion path ends in `IngestMixin.ingest_many`."""

    def __init__(self, db: Database, sources: SourceService, embedder: Embedder, settings: Settings) -> None:
        self.db = db
        self.sources = sources
        self.embedder = embedder
        self.settings = settings
        self.backlog = EmbeddingBacklog(db, embedder)  # phase two of ingestion: the vectors

    async def resolve_source(self, source_id: str | UUID | None, title: str | None) -> tuple[UUID, bool]:
        """The target source: the given id (must exist), else one found or created by title."""
        if source_id:
            return (await self.sources.get(source_id)).id, False
        if not title:
            raise InvalidArgument(
                "source_id is required (or a title, to create a source named after it).",
                SOURCE_LIST_HINT + " Or pass title='My notes' to create one.",
            )
        source, created = await self.sources.get_or_create(title)
        return source.id, created

    @asynccontextmanager
    async def source_for_write(
        self, source_id: str | UUID | None, title: str | None
    ) -> AsyncIterator[tuple[UUID, bool]]:
        """`resolve_source` for one write: a source created for it is removed again when the write fails
        (writes that fail create nothing), unless something else was stored in it meanwhile."""
        sid, created = await self.resolve_source(source_id, title)
        try:
            yield sid, created
        except Exception:
            if created:
                await self.sources.discard_if_empty(sid)
            raise
