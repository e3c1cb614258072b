"""grep's candidate blocks (services/code/grep.py), in path then line order, each with its file.

A common pattern has tens of thousands of candidate blocks, and page one reads a few hundred: the rows
are read from a cursor as the walk gets to them, so the others are never sent, decoded or paired here
(that was most of such a call's CPU). A `path` glob filters rows here, so then all are read at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from services.code.paths import matches

FIRST_FETCH = 256  # candidate rows the first read of the cursor takes; later reads double


@dataclass(frozen=True)
class FileRef:
    """A file of the chosen sources, as its sync manifest names it."""

    path: str
    source_id: UUID
    document_id: UUID


@dataclass
class Candidates:
    """The candidate blocks in path then line order, each with the file it is read for, and how many there
    are: read from a cursor as the walk gets to them (a common pattern has tens of thousands of candidates,
    page one reads a few hundred: decoding and pairing every row here was most of its CPU), or all at
    once when a `path` glob filters them here."""

    total: int
    items: list[tuple[FileRef, Any]]
    cursor: Any = None  # an asyncpg cursor over CANDIDATES_SQL; None once read to the end

    @classmethod
    async def read(cls, cursor: Any) -> Candidates:
        """The first rows of a cursor over CANDIDATES_SQL (each row has the count of all, `n`)."""
        rows = await cursor.fetch(FIRST_FETCH)
        found = cls(rows[0]["n"] if rows else 0, paired(rows), cursor)
        if len(found.items) >= found.total:
            found.cursor = None
        return found

    async def upto(self, count: int) -> None:
        """Read rows until `count` are in hand (or all are)."""
        while self.cursor is not None and len(self.items) < count:
            rows = await self.cursor.fetch(max(count - len(self.items), len(self.items), FIRST_FETCH))
            self.items.extend(paired(rows))
            if len(self.items) >= self.total or not rows:
                self.cursor = None


def paired(rows: list[Any], glob: Any = None) -> list[tuple[FileRef, Any]]:
    """Each candidate row with its file (one FileRef per run of rows of a file); a file the `path` glob
    leaves out is dropped."""
    order: list[tuple[FileRef, Any]] = []
    file: FileRef | None = None
    keep = False
    for row in rows:
        path, source_id = row["path"], row["source_id"]
        if file is None or file.path != path or file.source_id != source_id:
            file = FileRef(path, source_id, row["document_id"])
            keep = glob is None or matches(glob, path)
        if keep:
            order.append((file, row))
    return order
