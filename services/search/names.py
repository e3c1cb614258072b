"""Documented names as evidence in hybrid search (issue 36, point 7).

API reference pages say which names they document (services/pages/api_names.py) and where each entry
starts in the page's text (services/pages/api_places.py); the crawl keeps both in the symbol table
(`code_symbols` rows with an `anchor`). A query that is, or holds, an identifier-shaped word
(`asyncio.TaskGroup`, `Path.read_text`, `select_related`, `TaskGroup`; a single bare word only when it is
the whole query) is looked up there by its last part (the `name` index) within the searched sources, and
the entries qualified best for it (the qualified name ends with the query's parts, else holds them in
order: services/code/symbol_search.py) become a third leg of the fusion: the chunk holding each entry
gains `hybrid_name_weight` (relative to the other legs' weights together) of the best score a chunk can
have, and the scores are divided by (1 + that share) so they stay 0-1. Several chunks lifted alike are
ordered by the other legs. A query with no identifier-shaped word, or whose names no page in scope
documents, gets no leg at all: its ranking is the two-leg one, unchanged.

`search_type="code"` reads code documents only, which document no names: no leg there.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import numpy as np
import re2

from services.code.symbol_search import PARTS
from services.core.database import Database
from services.search.base import HIT_COLUMNS

#: a written name: identifier parts joined by `.`, `::` or `#`
IDENTIFIER = re2.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|#)[A-Za-z_][A-Za-z0-9_]*)*$")
CAMEL = re2.compile(r"[a-z0-9][A-Z]")
EDGES = "`'\"()[]{}<>,;:!?*"
MAX_NAMES = 5  # identifiers of one query looked up
MAX_ENTRIES = 500  # documented entries of those names read at most
ENTRIES_SQL = """
SELECT document_id, name, code_qualified_name(name, parent, qualified_name) AS qualified_name, char_start
FROM code_symbols
WHERE name = ANY($1::text[]) AND anchor IS NOT NULL AND ($2::uuid[] IS NULL OR source_id = ANY($2::uuid[]))
LIMIT $3
"""
#: the chunk holding each entry (the first ending after its offset); without an offset (recorded before
#: sql/043), the page's first chunk that holds the name
CHUNKS_SQL = """
SELECT DISTINCT held.id FROM unnest($1::uuid[], $2::int[], $3::text[]) AS e(document_id, at, name)
CROSS JOIN LATERAL (
    SELECT c.id FROM chunks c
    WHERE c.document_id = e.document_id AND (e.at IS NULL OR c.char_end > e.at)
    ORDER BY CASE WHEN e.at IS NULL AND strpos(c.text, e.name) = 0 THEN 1 ELSE 0 END, c.char_start
    LIMIT 1
) held
"""
ROWS_SQL = (
    f"SELECT {HIT_COLUMNS}, 0::float8 AS rrf, NULL::bigint AS vrank, NULL::bigint AS krank "
    "FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id = ANY($2::uuid[])"
)


def identifiers(query: str) -> list[list[str]]:
    """The identifier-shaped words of a query, each as its parts (`Path.read_text` -> [Path, read_text]):
    qualified, or with an underscore or an inner capital; a bare word only when it is the whole query."""
    words = query.split()
    found: list[list[str]] = []
    for word in words:
        token = word.strip(EDGES).rstrip(".").strip(EDGES)
        if not token or len(token) > 200 or not IDENTIFIER.search(token):
            continue
        parts = PARTS.split(token)
        if (len(parts) > 1 or "_" in token or CAMEL.search(token) or len(words) == 1) and parts not in found:
            found.append(parts)
    return found[:MAX_NAMES]


def qualification(qualifiers: list[str], qualified_name: str) -> int:
    """2: the qualified name ends with the query's qualifiers; 1: holds them in order; 0: neither."""
    held = PARTS.split(qualified_name)[:-1]
    if held[len(held) - len(qualifiers) :] == qualifiers:
        return 2
    remaining = iter(held)
    return 1 if all(any(q == h for h in remaining) for q in qualifiers) else 0


def best_entries(asked: list[list[str]], entries: list[Any]) -> list[Any]:
    """For each identifier asked, the entries of its name qualified best for it (none unqualified)."""
    chosen: dict[tuple[Any, str], Any] = {}
    for parts in asked:
        name, qualifiers = parts[-1], parts[:-1]
        scored = [(qualification(qualifiers, e["qualified_name"]), e) for e in entries if e["name"] == name]
        top = max((score for score, _ in scored), default=0)
        for score, entry in scored:
            if score and score == top:
                chosen[(entry["document_id"], entry["qualified_name"])] = entry
    return list(chosen.values())


class NameEvidence:
    """The name leg: which chunks document the names a query holds, and their fusion with the others."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def chunks(self, query: str, source_ids: list[UUID] | None, code_only: bool = False) -> set[UUID]:
        """The chunks holding the best-qualified entries of the query's names (empty: no leg)."""
        asked = [] if code_only else identifiers(query)
        if not asked:
            return set()
        names = sorted({parts[-1] for parts in asked})
        entries = best_entries(asked, await self.db.pool.fetch(ENTRIES_SQL, names, source_ids, MAX_ENTRIES))
        if not entries:
            return set()
        rows = await self.db.pool.fetch(
            CHUNKS_SQL,
            [e["document_id"] for e in entries],
            [e["char_start"] for e in entries],
            [e["name"] for e in entries],
        )
        return {row["id"] for row in rows}

    async def fuse(
        self, rows: list[Any], named: set[UUID], vector: np.ndarray, share: float, top: float, limit: int
    ) -> list[dict[str, Any]]:
        """The fused rows with the name leg: a named chunk gains `share * top` (`top`: the best fused score
        possible), every score is divided by 1 + share; named chunks the other legs did not bring are
        read (with a fused score of 0) so they can rank."""
        out = [dict(row) for row in rows]
        have = {row["chunk_id"] for row in out}
        missing = [chunk for chunk in named if chunk not in have]
        if missing:
            out += [dict(row) for row in await self.db.pool.fetch(ROWS_SQL, vector, missing)]
        for row in out:
            bonus = share * top if row["chunk_id"] in named else 0.0
            row["rrf"] = (float(row["rrf"]) + bonus) / (1.0 + share)
        out.sort(key=lambda row: (-row["rrf"], str(row["chunk_id"])))
        return out[:limit]
