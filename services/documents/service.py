"""DocumentService: ingestion, reading, listing, updating and deleting documents.

It is composed of small parts, each handed only what it uses: the Ingestor (chunk, embed, store: every
write of content goes through it), the SpecStore (OpenAPI specs), FileIngest (text, files, directories,
web pages), the Reader, the Changer (update, delete) and Upkeep (what crawls and syncs do to documents
they hold). Its public methods are the parts' own bound methods, so a signature is written once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from uuid import UUID

from services.core.database import Database
from services.core.errors import InvalidArgument
from services.core.settings import Settings
from services.documents.backlog import EmbeddingBacklog
from services.documents.change import Changer
from services.documents.files import FileIngest
from services.documents.ingest import Ingestor
from services.documents.read import Reader
from services.documents.specs import SpecStore
from services.documents.upkeep import Upkeep
from services.embeddings.base import Embedder
from services.sources.service import LIST_HINT as SOURCE_LIST_HINT
from services.sources.service import SourceService


class DocumentService:
    """Documents of sources; every ingestion path ends in `Ingestor.ingest_many`. Only this package
    writes the `documents` and `chunks` tables (tests/test_architecture.py)."""

    def __init__(self, db: Database, sources: SourceService, embedder: Embedder, settings: Settings) -> None:
        self.db = db
        self.sources = sources
        self.embedder = embedder
        self.settings = settings
        self.backlog = EmbeddingBacklog(db, embedder)  # phase two of ingestion: the vectors
        self.ingestor = ingestor = Ingestor(db, embedder, settings, self.backlog)
        self.specs = specs = SpecStore(db, ingestor)
        self.files = files = FileIngest(db, settings, ingestor, specs)
        self.reader = reader = Reader(db, sources)
        self.changer = changer = Changer(db, ingestor, reader)
        self.upkeep = upkeep = Upkeep(db)
        # ingest (every write of content)
        self.ingest = ingestor.ingest
        self.ingest_many = ingestor.ingest_many
        self.chunk = ingestor.chunk
        self.embed_chunks = ingestor.embed_chunks
        self.settle_embeddings = ingestor.settle_embeddings
        self.find_existing = ingestor.find_existing
        self.ingest_spec = specs.ingest_spec
        self.delete_stale_operations = specs.delete_stale_operations
        # text, files, directories, web pages
        self.create_from_text = files.create_from_text
        self.read_file = files.read_file
        self.parse_file = files.parse_file
        self.create_from_file = files.create_from_file
        self.create_from_directory = files.create_from_directory
        self.create_from_url = files.create_from_url
        # reading
        self.get = reader.get
        self.read_window = reader.read_window
        self.get_chunk = reader.get_chunk
        self.list = reader.list
        self.links = reader.links
        self.graph = reader.graph
        # changing
        self.update = changer.update
        self.set_links = changer.set_links
        self.delete = changer.delete
        # what crawls and syncs do to the documents they hold
        self.known = upkeep.known
        self.refresh_validators = upkeep.refresh_validators
        self.touch_fetched = upkeep.touch_fetched
        self.move = upkeep.move

    async def resolve_source(
        self, source_id: str | UUID | None, title: str | None, must_exist: bool = False
    ) -> tuple[UUID, bool]:
        """The target source: the given id (must exist), else one found by title, or created unless
        `must_exist` (then a title naming none is NOT_FOUND)."""
        if source_id:
            return (await self.sources.get(source_id)).id, False
        if not title:
            raise InvalidArgument(
                "source_id is required (or a title, to create a source named after it).",
                SOURCE_LIST_HINT + " Or pass title='My notes' to create one.",
            )
        source, created = await self.sources.get_or_create(title, must_exist=must_exist)
        return source.id, created

    @asynccontextmanager
    async def source_for_write(
        self, source_id: str | UUID | None, title: str | None, must_exist: bool = False
    ) -> AsyncIterator[tuple[UUID, bool]]:
        """`resolve_source` for one write: a source created for it is removed again when the write fails
        (writes that fail create nothing), unless something else was stored in it meanwhile."""
        sid, created = await self.resolve_source(source_id, title, must_exist)
        try:
            yield sid, created
        except Exception:
            if created:
                await self.sources.discard_if_empty(sid)
            raise
