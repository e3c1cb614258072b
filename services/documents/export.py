"""Nothing locked in: a source's documents written back out as markdown files with YAML front matter
(title, url, source, document id, fetched/updated dates), one file per document.

A web page goes to host/path.md; an ingested file to its path below the folder all of the source's
files share (so `notes/tea.md`, not `home/me/notes/tea.md` rebuilt under the export directory)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit
from uuid import UUID

import yaml

from services.core.errors import InvalidArgument

PAGE_SIZE = 200
MAX_NAME = 80
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
DOCUMENTS_SQL = """
SELECT id, title, url, document_type, content, metadata, created_at, updated_at
FROM documents WHERE source_id = $1 AND id > $2 ORDER BY id LIMIT $3
"""


@dataclass
class ExportReport:
    directory: Path
    written: list[Path] = field(default_factory=list)


def safe_part(text: str) -> str:
    """One path component from free text: no separators, no dot files, never empty."""
    part = UNSAFE.sub("-", text).strip("-.")[:MAX_NAME]
    return part or "document"


def relative_name(row: Any, file_root: PurePosixPath | None = None) -> Path:
    """Where a document goes inside the export: its URL's path when it has one (a file's below
    `file_root`), else its title."""
    url = row["url"] or ""
    parts = urlsplit(url)
    path = unquote(parts.path or "") if parts.scheme in ("http", "https", "file") else ""
    if parts.scheme == "file" and file_root is not None and PurePosixPath(path).is_relative_to(file_root):
        path = str(PurePosixPath(path).relative_to(file_root))
    pieces = [safe_part(p) for p in path.split("/") if p and p not in (".", "..")]
    if parts.scheme in ("http", "https") and parts.hostname:
        pieces.insert(0, safe_part(parts.hostname))
    if not pieces:
        pieces = [safe_part(row["title"])]
    stem = re.sub(r"\.(html?|md|markdown|txt|rst)$", "", pieces[-1], flags=re.IGNORECASE) or "index"
    return Path(*pieces[:-1], f"{stem}.md")


async def shared_folder(db: Any, source_id: UUID) -> PurePosixPath | None:
    """The deepest folder holding every file the source was ingested from (None: no files)."""
    rows = await db.pool.fetch("SELECT url FROM documents WHERE source_id = $1 AND url LIKE 'file:%'", source_id)
    folders = [str(PurePosixPath(unquote(urlsplit(r["url"]).path)).parent) for r in rows]
    return PurePosixPath(os.path.commonpath(folders)) if folders else None


def front_matter(row: Any, source_title: str) -> str:
    meta = {
        "title": row["title"],
        "url": row["url"],
        "source": source_title,
        "document_id": str(row["id"]),
        "type": row["document_type"],
        "fetched": (row["metadata"] or {}).get("fetched_at") or row["updated_at"].isoformat(),
        "created": row["created_at"].isoformat(),
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n\n"


def unique_path(directory: Path, name: Path, taken: set[Path]) -> Path:
    candidate, n = directory / name, 1
    while candidate in taken or candidate.exists():
        n += 1
        candidate = directory / name.with_name(f"{name.stem}-{n}{name.suffix}")
    taken.add(candidate)
    return candidate


async def export_source(db: Any, source_id: UUID, source_title: str, directory: Path) -> ExportReport:
    """Write every document of the source under `directory` (created; must be empty or new)."""
    directory = directory.expanduser().resolve()
    if directory.exists() and any(directory.iterdir()):
        raise InvalidArgument(f"{directory} is not empty.", "Export into a new or empty directory.")
    directory.mkdir(parents=True, exist_ok=True)
    report, taken, last = ExportReport(directory), set[Path](), UUID(int=0)
    root = await shared_folder(db, source_id)
    while True:
        rows = await db.pool.fetch(DOCUMENTS_SQL, source_id, last, PAGE_SIZE)
        for row in rows:
            target = unique_path(directory, relative_name(row, root), taken)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(front_matter(row, source_title) + row["content"], encoding="utf-8")
            report.written.append(target)
        if len(rows) < PAGE_SIZE:
            return report
        last = rows[-1]["id"]
