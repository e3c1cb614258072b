"""What a search result carries beyond its chunks, read once for the whole list after ranking.

One query for every passage of a result list: the passage's exact text (the document's content over
the passage's char range, so offsets inside it are document offsets; merged chunks' overlaps appear
once and the gaps between them as they are), its document's type, own metadata and freshness, its
source's title and version, and for code the number of newlines before the passage (its first line
is that plus one: `line_start` / `line_end` are counted from it, issue 29, point 3).
"""

from __future__ import annotations

from models import SearchHit
from services.core.database import Database
from services.documents.freshness import freshness_fields

#: A passage's text is read up to this many characters (three merged chunks are far shorter).
PASSAGE_LIMIT = 8000

DETAILS_SQL = """
SELECT s.i, substr(d.content, s.a + 1, s.b - s.a) AS text, d.document_type, d.metadata,
       d.fetched_at, d.ingested_at, d.indexed_at, src.title AS source_title, src.version,
       CASE WHEN d.document_type = 'code'
            THEN s.a - length(replace(substr(d.content, 1, s.a), E'\\n', '')) END AS lines_before
FROM unnest($1::uuid[], $2::int[], $3::int[]) WITH ORDINALITY AS s(doc, a, b, i)
JOIN documents d ON d.id = s.doc JOIN sources src ON src.id = d.source_id
"""


async def with_details(db: Database, hits: list[SearchHit]) -> list[SearchHit]:
    """The hits with their exact passage text and their document's and source's details."""
    if not hits:
        return hits
    rows = await db.pool.fetch(
        DETAILS_SQL,
        [h.document_id for h in hits],
        [h.char_start for h in hits],
        [min(h.char_end, h.char_start + PASSAGE_LIMIT) for h in hits],
    )
    by_index = {r["i"]: r for r in rows}
    out = []
    for i, hit in enumerate(hits, 1):
        row = by_index.get(i)
        if row is None:  # the document went away meanwhile: keep what the chunks said
            out.append(hit)
            continue
        metadata = dict(row["metadata"] or {})
        text = row["text"] or hit.text
        update = {
            "text": text,
            "char_end": hit.char_start + len(text),
            "document_type": row["document_type"],
            "document_metadata": metadata,
            "source_title": row["source_title"],
            "version": row["version"],
            "lines_before": row["lines_before"],
            "freshness": freshness_fields(row["fetched_at"], row["ingested_at"], row["indexed_at"], metadata),
        }
        out.append(hit.model_copy(update=update))
    return out
