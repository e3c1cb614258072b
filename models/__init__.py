"""Pydantic types shared by tools and services."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar, get_args
from uuid import UUID

from pydantic import BaseModel, Field

T = TypeVar("T")

SourceType = Literal["upload", "crawl", "api", "folder", "git"]
SearchType = Literal["hybrid", "vector", "rerank", "keyword", "code", "question"]
#: the search methods, in the order people are offered them (the CLI, the console, profiles, the tool):
#: `code` is hybrid over code documents only, `question` another name for hybrid (profiles design)
SEARCH_TYPES: tuple[str, ...] = get_args(SearchType)
IngestStatus = Literal["created", "updated", "unchanged"]


class Source(BaseModel):
    id: UUID
    title: str
    description: str | None = None
    url: str | None = None
    source_type: SourceType
    status: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    version: str | None = None


class SourceStats(BaseModel):
    documents_count: int
    chunks_count: int
    last_updated: datetime | None
    #: chunks stored (keyword-searchable) but not embedded yet: the source's embedding backlog
    chunks_pending: int = 0
    #: chunks whose injection scan found something (services/flags), and chunks not scanned yet
    chunks_flagged: int = 0
    chunks_unscanned: int = 0
    #: the titles of its first documents (oldest first, at most 5)
    sample_documents: list[str] = Field(default_factory=list)


class Document(BaseModel):
    """A document without its content (list and create views)."""

    id: UUID
    source_id: UUID
    title: str
    url: str | None = None
    document_type: str
    content_hash: str
    content_length: int
    #: the content's size in bytes (UTF-8)
    size_bytes: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    chunk_count: int
    created_at: datetime
    updated_at: datetime
    #: freshness (services/documents/freshness.py): fetched from the web / stored / chunks written
    fetched_at: datetime | None = None
    ingested_at: datetime | None = None
    indexed_at: datetime | None = None
    #: some chunks still wait for their vector (read by get and list only; None elsewhere)
    embedding_pending: bool | None = None


class ContentWindow(BaseModel):
    """A slice of a document's content, for reading long documents piece by piece."""

    offset: int
    text: str
    next_offset: int | None
    total_length: int


class ChunkView(BaseModel):
    id: UUID
    document_id: UUID
    chunk_index: int
    text: str
    char_start: int
    char_end: int
    heading_path: list[str]
    page_start: int | None = None  # paged documents (PDF, PPTX) only
    page_end: int | None = None
    #: injection flags (services/flags); ["unscanned"] for a chunk stored before flags existed
    flags: list[str] = Field(default_factory=list)


class IngestResult(BaseModel):
    document: Document
    status: IngestStatus
    chunks_created: int = 0


class FileFailure(BaseModel):
    path: str
    error: str


class Page(BaseModel, Generic[T]):
    items: list[T]
    total_count: int
    page: int
    per_page: int
    start: int | None = None  # set when the page was asked for by offset rather than by page number

    @property
    def has_more(self) -> bool:
        if self.start is not None:
            return self.start + len(self.items) < self.total_count
        return self.page * self.per_page < self.total_count


class SearchHit(BaseModel):
    chunk_id: UUID
    document_id: UUID
    document_title: str
    source_id: UUID
    url: str | None
    text: str
    score: float
    similarity: float
    match_type: str
    chunk_index: int
    char_start: int
    char_end: int
    heading_path: list[str] = Field(default_factory=list)
    page_start: int | None = None  # paged documents (PDF, PPTX) only
    page_end: int | None = None
    #: A passage merged from adjacent chunks: every chunk id in document order, and the last chunk's index
    #: (empty / None for a single chunk; then the passage is chunk `chunk_index` alone).
    chunk_ids: list[UUID] = Field(default_factory=list)
    chunk_index_end: int | None = None
    #: (char_start, char_end, chunk_index) of each chunk in `chunk_ids`, in the same order (empty for a
    #: single chunk).
    chunk_spans: list[tuple[int, int, int]] = Field(default_factory=list)
    #: fetched_at or ingested_at, indexed_at, last_modified (services/documents/freshness.py)
    freshness: dict[str, Any] = Field(default_factory=dict)
    #: injection flags of its chunks (services/flags; a merged passage has the union); [] = none found
    flags: list[str] = Field(default_factory=list)
    #: Filled after ranking (services/search/details.py): the document's type and own metadata, its
    #: source's title and version, and for code the newlines before `char_start` (lines are counted from it).
    document_type: str | None = None
    document_metadata: dict[str, Any] = Field(default_factory=dict)
    source_title: str | None = None
    version: str | None = None
    lines_before: int | None = None
