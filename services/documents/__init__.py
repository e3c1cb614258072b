"""Documents: ingestion (chunk + embed + store), reading, listing, updating and deleting.

`DocumentService` (service.py) is composed of one part per concern, each handed what it uses: ingest.py
(`Ingestor`: chunk, embed, store), specs.py (`SpecStore`), files.py (`FileIngest`: text, files,
directories, web pages), read.py (`Reader`), change.py (`Changer`), upkeep.py (`Upkeep`: what crawls
and syncs do to the documents they hold). Only this package writes the `documents` and `chunks`
tables. text.py holds the constants and pure helpers the rest of Archivist imports from here.
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
