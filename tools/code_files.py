"""manage_document by path: `get` with `path` (+ line_start, line_end) reads a synced file's lines,
numbered; `list` with `path` lists the files under a directory of a source (services/code/files.py)."""

from __future__ import annotations

from typing import Any

from services.access.scope import current_scope
from services.app import Archivist
from services.core.errors import InvalidArgument
from services.flags.reading import govern_unstored
from tools.common import document_uri


def need_source(args: Any) -> None:
    if not args.path:
        raise InvalidArgument("line_start and line_end need path (a file of the source).", "Pass path='src/app.py'.")
    if not args.source_id:
        raise InvalidArgument(
            "path needs source_id (the source the file belongs to).",
            "Pass source_id=... with path, e.g. from a grep hit.",
        )


async def read_lines(app: Archivist, args: Any) -> dict[str, Any]:
    need_source(args)
    source = await app.sources.get(args.source_id)  # NotFound outside the caller's scope
    read = await app.code_files.read(source.id, args.path, args.line_start, args.line_end)
    width = len(str(read.line_end or 1))
    payload: dict[str, Any] = {
        "file": {
            "path": read.path,
            "source_id": str(read.source_id),
            "document_id": str(read.document_id),
            "uri": document_uri(read.document_id),
            "total_lines": read.total_lines,
            **({"commit": read.commit} if read.commit else {}),
            **({"version": read.version} if read.version else {}),
        },
        "content": {
            "line_start": read.line_start,
            "line_end": read.line_end,
            "text": "\n".join(f"{n:>{width}}  {text}" for n, text in read.lines),
            "next_line": read.line_end + 1 if read.line_end < read.total_lines else None,
        },
    }
    content = govern_unstored(payload["content"]["text"], current_scope())  # the one reading policy
    payload["content"].update(text=content.text, **content.fields())
    if read.cut_lines:
        payload["content"]["lines_cut"] = read.cut_lines
    if read.line_end < read.total_lines:
        payload["hint"] = f"More lines: line_start={read.line_end + 1}."
    return payload


async def list_files(app: Archivist, args: Any) -> dict[str, Any]:
    need_source(args)
    source = await app.sources.get(args.source_id)
    listed = await app.code_files.list(source.id, args.path, args.page, min(args.per_page, 20))
    return {
        "files": listed.files,
        "count": len(listed.files),
        "total_count": listed.total,
        "page": listed.page,
        "per_page": listed.per_page,
        "has_more": listed.page * listed.per_page < listed.total,
        "path": args.path,
    }
