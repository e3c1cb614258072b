"""Reading the symbol table: definitions of a name, its references, the outline of a code file.

A query is a symbol, bare (`copytree`) or qualified (`shutil.copytree`, `Path.read_text`,
`tokio::spawn`): rows are found by the last part (an index on `name`), then ranked by how much of the
qualifier they carry: the qualified name ends with the query's parts, else holds them in order, else
its path names them; then public before private, outside tests before inside, shallow before deep.
Paths come from the sync manifests (git_files, folder_files), else the document's metadata `path`,
so a renamed file is found at its new path and identical files each at their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any
from uuid import UUID

import asyncpg
import re2

from services.code.qualified import OWN_MODULE
from services.code.symbols import path_qualifier
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound

MAX_QUERY = 300
MAX_CANDIDATES = 5000  # definitions of one name read at most (then ranked)
PARTS = re2.compile(r"::|\.|#|->")
#: each indexed file's path(s): the manifests of git and folder syncs, else the document's own
PATHS = (
    "LEFT JOIN LATERAL (SELECT path FROM git_files g WHERE g.document_id = d.id UNION ALL "
    "SELECT path FROM folder_files f WHERE f.document_id = d.id) m ON true"
)
PATH = "coalesce(m.path, d.metadata->>'path', d.url, d.title)"


@dataclass
class SymbolHit:
    source_id: UUID
    document_id: UUID
    path: str
    name: str
    kind: str
    qualified_name: str
    parent: str | None
    line_start: int | None
    line_end: int | None
    signature: str
    doc: str
    anchor: str | None = None
    url: str | None = None
    title: str = ""
    commit: str | None = None
    version: str | None = None


@dataclass
class ReferenceHit:
    source_id: UUID
    document_id: UUID
    path: str
    line: int
    text: str = ""
    commit: str | None = None
    version: str | None = None


@dataclass
class Page:
    hits: list[Any]
    total: int
    offset: int
    next_offset: int | None
    notes: list[str] = field(default_factory=list)


def split_parts(text: str) -> list[str]:
    """`a.b::C#d->e` -> [a, b, C, d, e]: what PARTS.split gives, with str methods (ranking splits the
    qualified name of every candidate, and pyre2's split costs ~0.1 ms a call: most of a name with
    hundreds of definitions)."""
    return text.replace("::", ".").replace("->", ".").replace("#", ".").split(".")


def with_prefix(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def qualified(hit: SymbolHit, language: str | None) -> SymbolHit:
    """The hit with its file's path qualifier (a Python module) in front of its names."""
    prefix = path_qualifier(language, hit.path)
    if prefix:
        hit.qualified_name = with_prefix(prefix, hit.qualified_name)
        hit.parent = with_prefix(prefix, hit.parent) if hit.parent else None
    return hit


def split_symbol(query: str) -> list[str]:
    """The parts of a written symbol (`a.b::C#d` -> [a, b, C, d]); InvalidArgument when there is none."""
    text = query.strip()
    parts = [p.strip() for p in PARTS.split(text)] if 0 < len(text) <= MAX_QUERY else []
    if not parts or not parts[-1] or any(not p or " " in p for p in parts):
        raise InvalidArgument(
            f"'{query[:100]}' is not a symbol name.",
            "Pass a name, bare or qualified: copytree, shutil.copytree, Path.read_text, tokio::spawn.",
        )
    return parts


def qualifier_score(qualifiers: list[str], qualified_name: str, path: str) -> int:
    """3: the qualified name ends with the query; 2: holds its parts in order; 1: with the path's
    parts; 0: only the name matches."""
    if not qualifiers:
        return 3
    held = split_parts(qualified_name)[:-1]
    if held[-len(qualifiers) :] == qualifiers:
        return 3
    if _in_order(qualifiers, held):
        return 2
    where = [*PurePosixPath(path).with_suffix("").parts, *held]
    return 1 if all(q in where for q in qualifiers) else 0


def _in_order(wanted: list[str], held: list[str]) -> bool:
    it = iter(held)
    return all(any(w == h for h in it) for w in wanted)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@lru_cache(maxsize=8192)
def _in_tests(path: str) -> bool:
    return any(p in ("test", "tests", "testing") or p.startswith("test_") for p in PurePosixPath(path).parts)


def rank_key(hit: SymbolHit, score: int) -> tuple[Any, ...]:
    depth = len(split_parts(hit.qualified_name))
    return (-score, hit.anchor is not None, _private(hit.name), _in_tests(hit.path), depth, hit.path, hit.line_start)


#: a file's lines of names[k] (sql/049: one row per file, each name's lines one after another in `lines`)
SLICE = "r.lines[coalesce(r.ends[p.k - 1], 0) + 1 : r.ends[p.k]]"
REFERENCES_SQL = (
    f"SELECT r.source_id, r.document_id, {SLICE} AS lines, {{path}} AS path "
    "FROM code_references r CROSS JOIN LATERAL (SELECT array_position(r.names, $1::text) AS k) p "
    "JOIN documents d ON d.id = r.document_id {paths} "
    "WHERE r.names @> ARRAY[$1::text] AND ($2::uuid[] IS NULL OR r.source_id = ANY($2)){only} "
    "ORDER BY 4, r.document_id"
)
#: files whose uses were not resolved (another language, or a Python file indexed before sql/043)
UNRESOLVED = (
    " AND NOT EXISTS (SELECT 1 FROM code_symbol_files f WHERE f.document_id = r.document_id "
    "AND f.language = 'python' AND f.qualified IS NOT NULL)"
)
#: a file's qualified uses of a name, found through the files whose references name it (sql/061: each
#: name of a file's qualified uses is one of its reference names)
QUALIFIED_SQL = (
    f"SELECT r.source_id, r.document_id, r.qualifiers[p.k] AS qualifier, {SLICE} AS lines, {{path}} AS path, "
    "f.language FROM code_references n JOIN code_qualified_references r ON r.document_id = n.document_id "
    "CROSS JOIN LATERAL unnest(array_positions(r.names, $1::text)) "
    "AS p(k) JOIN documents d ON d.id = r.document_id {paths} "
    "LEFT JOIN code_symbol_files f ON f.document_id = r.document_id "
    "WHERE n.names @> ARRAY[$1::text] AND ($2::uuid[] IS NULL OR n.source_id = ANY($2))"
)
QUALIFIED_NOTE = (
    "Qualified: in Python files, the uses the file's imports resolve to that qualifier (an instance's "
    "methods cannot be told); in other languages, every use of the name."
)


#: what ranking needs of every definition of a name (the rest is read for the page only: a name with
#: hundreds of definitions sends 20 signatures and docstrings, not all of them). A code file's definitions
#: are arrays in its code_symbol_files row (sql/060), found by the hashes of their names and rechecked by
#: the name: the row's arrays are decompressed once per file (the subquery fenced by OFFSET 0 copies them),
#: then each definition's elements read; the names API reference pages document are rows of code_symbols.
#: `at`: the definition's position in its file's arrays (NULL for a documented name)
CANDIDATES_SQL = (
    "SELECT x.source_id, x.document_id, NULL::tid AS ctid, k AS at, $1::text AS name, "
    "code_qualified_name($1, x.parents[k], x.qualified_names[k]) AS qualified_name, x.line_starts[k] AS line_start, "
    "NULL::text AS anchor, x.path, x.language FROM ("
    "SELECT f.source_id, f.document_id, f.language, array_positions(f.names, $1::text) AS ks, "
    "f.parents[:] AS parents, f.qualified_names[:] AS qualified_names, f.line_starts[:] AS line_starts, "
    f"{PATH} AS path FROM code_symbol_files f "
    f"JOIN documents d ON d.id = f.document_id {PATHS} "
    "WHERE code_name_keys(f.names) @> ARRAY[hashtext($1::text)] AND ($2::uuid[] IS NULL OR f.source_id = ANY($2)) "
    "OFFSET 0) x CROSS JOIN LATERAL unnest(x.ks) AS k "
    "UNION ALL "
    "SELECT s.source_id, s.document_id, s.ctid, NULL::integer, s.name, "
    "code_qualified_name(s.name, s.parent, s.qualified_name), s.line_start, s.anchor, "
    f"{PATH}, NULL::text FROM code_symbols s JOIN documents d ON d.id = s.document_id {PATHS} "
    "WHERE s.name = $1 AND ($2::uuid[] IS NULL OR s.source_id = ANY($2)) "
    "LIMIT $3"
)
#: the rest of the page's definitions: code definitions by (document, position), documented names by ctid
PAGE_SQL = (
    "SELECT w.n, f.kinds[w.at] AS kind, f.parents[w.at] AS parent, f.line_ends[w.at] AS line_end, "
    "f.signatures[w.at] AS signature, f.docs[w.at] AS doc, d.url, d.title "
    "FROM unnest($1::uuid[], $2::int[]) WITH ORDINALITY AS w(document_id, at, n) "
    "JOIN code_symbol_files f ON f.document_id = w.document_id JOIN documents d ON d.id = w.document_id "
    "WHERE w.at IS NOT NULL "
    "UNION ALL "
    "SELECT w.n, s.kind, s.parent, s.line_end, s.signature, s.doc, d.url, d.title "
    "FROM unnest($3::tid[]) WITH ORDINALITY AS w(ctid, n) JOIN code_symbols s ON s.ctid = w.ctid "
    "JOIN documents d ON d.id = s.document_id WHERE w.ctid IS NOT NULL"
)

#: a code file's definitions (sql/060: arrays in file order), by line as before (ties in file order)
OUTLINE_SQL = (
    "SELECT u.name, u.kind, code_qualified_name(u.name, u.parent, u.qualified_name) AS qualified_name, u.parent, "
    "u.line_start, u.line_end, u.signature FROM code_symbol_files f CROSS JOIN LATERAL "
    "unnest(f.names, f.kinds, f.parents, f.qualified_names, f.line_starts, f.line_ends, f.signatures) "
    "WITH ORDINALITY AS u(name, kind, parent, qualified_name, line_start, line_end, signature, n) "
    "WHERE f.document_id = $1 ORDER BY u.line_start, u.line_end DESC, u.n"
)


def candidate(row: Any) -> SymbolHit:
    """A definition as ranking sees it (its kind, span, signature and text come with the page)."""
    return SymbolHit(
        row["source_id"], row["document_id"], row["path"], row["name"], "", row["qualified_name"], None,
        row["line_start"], None, "", "", row["anchor"],
    )  # fmt: skip


def rank(hits: list[SymbolHit], name: str, qualifiers: list[str], query: str) -> tuple[list[SymbolHit], list[str]]:
    """The definitions best first (those qualified as asked, when any is), and a note when none is."""
    scored = [(qualifier_score(qualifiers, h.qualified_name, h.path), h) for h in hits]
    notes = []
    if qualifiers and scored and not any(score for score, _ in scored):
        notes.append(f"No definition of {name} is qualified as {query.strip()}: every definition of {name}.")
    elif qualifiers:
        scored = [(score, h) for score, h in scored if score]
    scored.sort(key=lambda pair: rank_key(pair[1], pair[0]))
    return [h for _, h in scored], notes


async def fill_definitions(conn: asyncpg.Connection, page: list[SymbolHit], found: list[Any]) -> None:
    """The page's definitions get the rest of their row (read in the snapshot that found them)."""
    rows: dict[int, Any] = {}
    if found:
        code = ([f["document_id"] if f["at"] is not None else None for f in found], [f["at"] for f in found])
        documented = [f["ctid"] for f in found]
        rows = {r["n"]: r for r in await conn.fetch(PAGE_SQL, *code, documented)}
    for n, (hit, candidate_row) in enumerate(zip(page, found, strict=True), 1):
        row = rows[n]
        prefix = path_qualifier(candidate_row["language"], hit.path)
        hit.kind, hit.line_end, hit.signature, hit.doc = row["kind"], row["line_end"], row["signature"], row["doc"]
        hit.parent = with_prefix(prefix, row["parent"]) if row["parent"] else None
        hit.url, hit.title = row["url"], row["title"]


class SymbolSearch:
    """Definitions, references and outlines over the symbol table (sql/038_code_symbols.sql)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def definitions(self, query: str, sources: list[UUID] | None, offset: int, limit: int) -> Page:
        parts = split_symbol(query)
        name, qualifiers = parts[-1], parts[:-1]
        async with self.db.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            rows = await conn.fetch(CANDIDATES_SQL, name, sources, MAX_CANDIDATES)
            hits = [qualified(candidate(row), row["language"]) for row in rows]
            found = {id(h): row for h, row in zip(hits, rows, strict=True)}
            ranked, notes = rank(hits, name, qualifiers, query)
            page = ranked[offset : offset + limit]
            await fill_definitions(conn, page, [found[id(h)] for h in page])
        await self._versions(page)
        following = offset + limit if offset + limit < len(ranked) else None
        return Page(page, len(ranked), offset, following, notes)

    async def references(self, query: str, sources: list[UUID] | None, offset: int, limit: int) -> Page:
        """Where a name is used, definitions excluded. A qualified query keeps, in Python files, the uses
        whose qualifier (resolved through the file's imports: services/code/qualified.py) ends with the
        query's; files of other languages (and Python files indexed before that) match by the name."""
        parts = split_symbol(query)
        name, qualifiers = parts[-1], parts[:-1]
        notes = []
        if qualifiers:
            rows = await self._qualified(name, qualifiers, sources)
            notes.append(QUALIFIED_NOTE)
        else:
            rows = await self.db.pool.fetch(REFERENCES_SQL.format(path=PATH, paths=PATHS, only=""), name, sources)
        total = sum(len(row["lines"]) for row in rows)
        page: list[ReferenceHit] = []
        seen = 0
        for row in rows:
            count = len(row["lines"])
            if seen + count > offset and len(page) < limit:
                for line in row["lines"][max(0, offset - seen) :][: limit - len(page)]:
                    page.append(ReferenceHit(row["source_id"], row["document_id"], row["path"], line))
            seen += count
        await self._line_texts(page)
        await self._versions(page)
        following = offset + limit if offset + limit < total else None
        return Page(page, total, offset, following, notes)

    async def _qualified(self, name: str, qualifiers: list[str], sources: list[UUID] | None) -> list[dict[str, Any]]:
        """Per file (in path order), the lines of the uses of `name` qualified as asked."""
        resolved = await self.db.pool.fetch(QUALIFIED_SQL.format(path=PATH, paths=PATHS), name, sources)
        files: dict[UUID, dict[str, Any]] = {}
        for row in resolved:
            written = row["qualifier"]
            held = path_qualifier(row["language"], row["path"]) if written == OWN_MODULE else written
            parts = split_parts(held) if held else []
            if len(parts) >= len(qualifiers) and parts[len(parts) - len(qualifiers) :] == qualifiers:
                entry = files.setdefault(row["document_id"], {**dict(row), "lines": set()})
                entry["lines"].update(row["lines"])
        unqualified = await self.db.pool.fetch(
            REFERENCES_SQL.format(path=PATH, paths=PATHS, only=UNRESOLVED), name, sources
        )
        found = [{**entry, "lines": sorted(entry["lines"])} for entry in files.values()]
        found += [dict(row) for row in unqualified]
        return sorted(found, key=lambda row: (row["path"], str(row["document_id"])))

    async def document_at(self, sources: Any, source_id: str, path: str) -> UUID:
        """The document of the file at `path` in a source (NotFound outside the caller's scope)."""
        source = await sources.get(source_id)
        clean = path.strip().lstrip("/")
        found = await self.db.pool.fetchval(
            "SELECT document_id FROM git_files WHERE source_id = $1 AND path = $2 UNION ALL "
            "SELECT document_id FROM folder_files WHERE source_id = $1 AND path = $2 UNION ALL "
            "SELECT id FROM documents WHERE source_id = $1 AND metadata->>'path' = $2 LIMIT 1",
            source.id,
            clean,
        )
        if found is None:
            raise NotFound(
                f"No file at path {clean[:200]} in source {source.id}.",
                "Use manage_document(action='list', source_id=...) to see its documents.",
            )
        return UUID(str(found))

    async def outline(self, document_id: UUID) -> dict[str, Any] | None:
        """The code file's symbols in file order, None when the document is not an indexed code file."""
        summary = await self.db.pool.fetchrow(
            f"SELECT f.language, f.capped, {PATH} AS path FROM code_symbol_files f "
            f"JOIN documents d ON d.id = f.document_id {PATHS} WHERE f.document_id = $1 LIMIT 1",
            document_id,
        )
        if summary is None:
            return None
        rows = await self.db.pool.fetch(OUTLINE_SQL, document_id)
        prefix = path_qualifier(summary["language"], summary["path"])
        symbols = [dict(r) for r in rows]
        for symbol in symbols:
            symbol["qualified_name"] = with_prefix(prefix, symbol["qualified_name"])
            symbol["parent"] = with_prefix(prefix, symbol["parent"]) if symbol["parent"] else None
        return {"language": summary["language"], "capped": summary["capped"], "symbols": symbols}

    async def _line_texts(self, hits: list[ReferenceHit]) -> None:
        wanted: dict[UUID, set[int]] = {}
        for hit in hits:
            wanted.setdefault(hit.document_id, set()).add(hit.line)
        if not wanted:
            return
        rows = await self.db.pool.fetch("SELECT id, content FROM documents WHERE id = ANY($1)", list(wanted))
        texts: dict[tuple[UUID, int], str] = {}
        for row in rows:
            split = (row["content"] or "").split("\n")
            for line in wanted[row["id"]]:
                texts[(row["id"], line)] = split[line - 1].rstrip("\r") if 0 < line <= len(split) else ""
        for hit in hits:
            hit.text = texts.get((hit.document_id, hit.line), "")

    async def _versions(self, hits: list[Any]) -> None:
        """Each hit's source commit (git) and version label."""
        ids = list({h.source_id for h in hits})
        if not ids:
            return
        rows = await self.db.pool.fetch(
            "SELECT s.id, s.version, g.last_commit FROM sources s LEFT JOIN source_git g ON g.source_id = s.id "
            "WHERE s.id = ANY($1)",
            ids,
        )
        found = {r["id"]: (r["last_commit"], r["version"]) for r in rows}
        for hit in hits:
            hit.commit, hit.version = found.get(hit.source_id, (None, None))
