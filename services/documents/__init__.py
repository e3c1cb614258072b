"""Documents: ingestion (chunk + embed + store), reading, listing, updating and deleting.

`DocumentService` (service.py) is assembled from one part per concern: ingest.py (chunk, embed,
store), files.py (text, files, directories, web pages), read.py, change.py; text.py holds the
constants and pure helpers the rest of Archivist imports from here.
"""

from services.documents.service import DocumentService
from services.documents.text import (
    CHUNK_COLUMNS,
    DOC_HINT,
    DOCUMENT_COLUMNS,
    WINDOW_SIZE,
    NewDocument,
    check_metadata,
    chunk_context,
    content_hash,
    embedding_text,
    guess_text_type,
    guess_title,
    page_content,
)

__all__ = [
    "CHUNK_COLUMNS",
    "DOC_HINT",
    "DOCUMENT_COLUMNS",
    "WINDOW_SIZE",
    "DocumentService",
    "NewDocument",
    "check_metadata",
    "chunk_context",
    "content_hash",
    "embedding_text",
    "guess_text_type",
    "guess_title",
    "page_content",
]
