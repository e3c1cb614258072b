"""What an agent receives, item by item (issue 40, point 5): one view per kind of list item a reply
carries. Each names the fields an item may hold and their JSON types; the published `outputSchema`
of every tool is derived from these (tools/schemas.py), and the tool tests validate live replies
against them strictly, so a field a shaper adds without its view fails them. A type with None is a
value that can be null; many fields are left out of an item when they do not apply or were not asked
for (`fields=`), which the schema does not repeat (the tool descriptions and the skill say when)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

Text = str | None
#: metadata as stored, or cut to JSON text of 1,000 characters (tools/common.metadata_view)
Metadata = dict[str, Any] | str


class SourceView(BaseModel):
    """A source (manage_source; tools/common.source_view, stats on get/list, origin on get)."""

    id: str
    uri: str
    title: str
    description: Text
    url: Text
    source_type: str
    version: Text
    status: str
    metadata: Metadata
    created_at: str
    updated_at: str
    truncated: bool
    documents_count: int
    chunks_count: int
    last_updated: Text
    chunks_pending: int
    chunks_flagged: int
    chunks_unscanned: int
    sample_documents: list[str]
    #: what it follows (services/sources/origin.py): kind, origin, and per kind more (a folder, a commit)
    kind: str
    origin: Text


class DocumentView(BaseModel):
    """A document without its text (manage_document; tools/common.document_view)."""

    id: str
    uri: str
    source_id: str
    title: str
    url: Text
    document_type: str
    mime_type: str
    content_length: int
    size_bytes: int
    chunks_count: int
    #: ready or pending_embedding (get and list)
    status: str
    metadata: Metadata
    created_at: str
    updated_at: str
    fetched_at: str
    ingested_at: str
    indexed_at: Text
    last_modified: str
    truncated: bool
    chunks_created: int


class JobView(BaseModel):
    """A crawl or sync job (crawl_website; tools/crawl_website.job_view)."""

    id: str
    source_id: Text
    kind: str
    status: str
    url: Text
    max_pages: int
    recursive: bool
    params: dict[str, Any]
    pages_crawled: int
    pages_failed: int
    pages_pending: int
    pages_skipped: int
    skipped_by_reason: dict[str, Any]
    documents_created: int
    documents_updated: int
    documents_unchanged: int
    documents_deleted: int
    total_chunks: int
    pages_searchable: int
    chunks_embedded: int
    chunks_pending: int
    embedding_eta_seconds: int | float | None
    created_at: str
    started_at: Text
    completed_at: Text
    error: Text
    warnings: list[str]
    truncated: bool
    cancel_requested: bool
    changes: dict[str, Any]
    recent_errors: list[dict[str, Any]]


class HitView(BaseModel):
    """A search result of any search_type: a passage (tools/hits.py, its optional fields by `fields=`),
    a web page (title, url, content, engine), a grep line, a symbol's definition or reference."""

    chunk_id: str
    document_id: str
    document_title: str
    text: str
    score: int | float
    match_type: str
    #: exactly the contract's three keys: source_id, chunk_index, url (never cut, unlike a document's)
    metadata: dict[str, Any]
    char_start: int
    char_end: int
    truncated: bool
    page_number: int | str
    path: str
    line: int
    line_start: int
    line_end: int
    commit: str
    version: str
    flags: list[str]
    heading_path: list[str]
    similarity: int | float
    chunk_ids: list[str]
    chunk_index_end: int
    uri: str
    source_id: str
    source_title: Text
    document_metadata: Metadata
    fetched_at: str
    ingested_at: str
    indexed_at: str
    last_modified: str
    symbol: dict[str, Any]
    title: str
    url: Text
    content: str
    engine: Text


class PassageView(BaseModel):
    """A cited passage of search_knowledge_base(max_tokens=...) (services/search/context.py packs them)."""

    n: int
    text: str
    tokens: int
    truncated: bool
    score: float
    uri: str
    #: document title, heading path, source, url, version and freshness of the passage
    citation: dict[str, Any] = Field(default_factory=dict)
    #: injection flags (docs/flags.md); a passage with any is marked untrusted
    flags: list[str] = Field(default_factory=list)
    untrusted: bool = False

    def item(self) -> dict[str, Any]:
        """The reply item: `untrusted` only on a flagged passage."""
        return self.model_dump(exclude=None if self.untrusted else {"untrusted"})
