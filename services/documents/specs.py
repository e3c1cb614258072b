"""OpenAPI specifications as documents: one per operation plus an overview, all under the spec's URL.

Each document's URL is `<spec url>#<fragment>` ("...#get-/pets/{id}", "...#overview") and its
metadata names the spec (`openapi_spec`), so ingesting the same spec again updates the operations
in place (same URL, same document), leaves unchanged ones alone, and deletes the operations that
are gone from the spec. A spec is loaded and converted in the limited parser pool under the "openapi"
budget (services/core/budgets.py), never in the server process: a spec over it fails with OverBudget and
nothing already stored is touched.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from models import IngestResult
from services.core.budgets import budget
from services.core.database import Database
from services.core.settings import Settings
from services.documents.ingest import Ingestor
from services.documents.text import NewDocument, check_metadata
from services.fetchers.base import FetchResult
from services.openapi import OVERVIEW_FRAGMENT, SPEC_MEDIA_TYPES, SpecDocument, convert_spec_text, might_be_spec
from services.parsers.isolation import parser_pool
from services.parsers.text import decode_text

logger = logging.getLogger(__name__)

#: Metadata key naming the spec a document was made from.
SPEC_KEY = "openapi_spec"
#: Operations embedded per `ingest_many` call.
SPEC_BATCH = 64
MAX_LISTED = 20


@dataclass
class SpecIngestResult:
    """What ingesting one spec did."""

    spec_url: str
    title: str
    openapi_version: str
    results: list[IngestResult] = field(default_factory=list)  # overview first, then each operation
    deleted: int = 0  # operations no longer in the spec
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for result in self.results if result.status == status)

    @property
    def chunks_created(self) -> int:
        return sum(result.chunks_created for result in self.results)

    def summary(self) -> dict[str, Any]:
        """The reply body for a tool or console."""
        return {
            "spec_url": self.spec_url,
            "api_title": self.title,
            "openapi_version": self.openapi_version,
            "operations": max(len(self.results) - 1, 0),
            **{f"documents_{status}": self.count(status) for status in ("created", "updated", "unchanged")},
            "documents_deleted": self.deleted,
            "chunks_created": self.chunks_created,
            "documents": [
                {"id": r.document.id, "title": r.document.title, "url": r.document.url, "status": r.status}
                for r in self.results[:MAX_LISTED]
            ],
            "lists_cut": len(self.results) > MAX_LISTED,
            "message": f"OpenAPI spec '{self.title}': {len(self.results) - 1} operations and an overview "
            f"({self.count('created')} created, {self.count('updated')} updated, {self.count('unchanged')} "
            f"unchanged, {self.deleted} removed). Use manage_document(action='list', source_id=...) to page "
            "through them.",
        }


def page_spec_text(page: FetchResult) -> str | None:
    """The text of a fetched page that may hold a spec: a JSON/YAML body (handed over raw), or plain
    text that looks like one (raw file hosts serve YAML and JSON as text/plain); else None."""
    if not page.ok:
        return None
    if page.raw is not None and page.content_type in SPEC_MEDIA_TYPES:
        return decode_text(page.raw)
    if page.content_type == "text/plain" and might_be_spec(page.markdown):
        return page.markdown
    return None


async def spec_documents(text: str, name: str, settings: Settings) -> list[SpecDocument] | None:
    """The documents of the spec `text` holds, else None; loaded and converted in the limited parser
    pool under the "openapi" budget (OverBudget past it)."""
    if not might_be_spec(text):
        return None
    limits = budget("openapi")
    limits.check_input(len(text), settings.max_file_bytes, name[:200])
    return await parser_pool(settings).run(limits, name[:200], convert_spec_text, text, name)


async def page_spec(page: FetchResult, settings: Settings) -> list[SpecDocument] | None:
    """The documents of the spec a fetched page holds, else None."""
    text = page_spec_text(page)
    return None if text is None else await spec_documents(text, page.final_url or page.url, settings)


async def spec_in(item: NewDocument, settings: Settings) -> list[SpecDocument] | None:
    """The documents of the spec a parsed JSON/YAML file holds, else None."""
    if item.document_type not in ("json", "yaml"):
        return None
    return await spec_documents(item.content, item.title, settings)


class SpecStore:
    """OpenAPI specs stored as documents, through the Ingestor (part of DocumentService)."""

    def __init__(self, db: Database, ingestor: Ingestor) -> None:
        self.db = db
        self.ingestor = ingestor

    async def ingest_spec(
        self,
        source_id: UUID,
        documents: list[SpecDocument],
        spec_url: str,
        metadata: dict[str, Any] | None = None,
    ) -> SpecIngestResult:
        """Store a converted spec's overview and operations; delete the operations it no longer has."""
        started = time.perf_counter()
        extra = check_metadata(metadata)
        items = [self._spec_item(document, spec_url, extra) for document in documents]
        results: list[IngestResult] = []
        for start in range(0, len(items), SPEC_BATCH):
            results += await self.ingestor.ingest_many(source_id, items[start : start + SPEC_BATCH])
        deleted = await self.delete_stale_operations(source_id, spec_url, [item.url or "" for item in items])
        overview = documents[0].metadata
        outcome = SpecIngestResult(
            spec_url,
            str(overview.get("api_title")),
            str(overview.get("openapi_version")),
            results,
            deleted,
            time.perf_counter() - started,
        )
        logger.info(
            "spec %s: %d documents (%d created, %d updated), %d removed in %.1f s",
            spec_url,
            len(results),
            outcome.count("created"),
            outcome.count("updated"),
            deleted,
            outcome.seconds,
        )
        return outcome

    @staticmethod
    def _spec_item(document: SpecDocument, spec_url: str, extra: dict[str, Any]) -> NewDocument:
        metadata = {**document.metadata, SPEC_KEY: spec_url, **extra}
        url = f"{spec_url}#{document.fragment or OVERVIEW_FRAGMENT}"
        return NewDocument(document.title.strip()[:500], document.markdown, "markdown", url, metadata)

    async def delete_stale_operations(self, source_id: UUID, spec_url: str, keep: list[str]) -> int:
        """Delete the source's documents made from `spec_url` whose URL is not in `keep`."""
        rows = await self.db.pool.fetch(
            "DELETE FROM documents WHERE source_id = $1 AND metadata->>$2 = $3 AND NOT (url = ANY($4::text[])) "
            "RETURNING id",
            source_id,
            SPEC_KEY,
            spec_url,
            keep,
        )
        if rows:
            await self.db.pool.execute("UPDATE sources SET updated_at = now() WHERE id = $1", source_id)
        return len(rows)
