"""`archivist sources [list|delete]` and `archivist documents list|get|delete`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from commands.output import fail, print_json, print_table, say, usage, when

if TYPE_CHECKING:
    from services.app import Archivist

EMPTY_SOURCES = "No sources yet. Add one with: archivist ingest PATH --source NAME"


def add_source_commands(sub: Any) -> None:
    sources = sub.add_parser(
        "sources",
        help="list sources with their document and chunk counts, or delete one",
        description="List sources (the default), or delete one with everything in it.",
        epilog="examples:\n  archivist sources\n  archivist sources --json\n  archivist sources delete Notes --yes",
    )
    sources.add_argument("--json", action="store_true", help="print JSON for scripts")
    ops = sources.add_subparsers(dest="op", metavar="{list,delete}")
    listing = ops.add_parser("list", help="list sources (the default)", description="List sources.")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    delete = ops.add_parser(
        "delete",
        help="delete a source with its documents and chunks",
        description="Delete a source and, with it, its documents and chunks.",
        epilog="example:\n  archivist sources delete 'Old notes' --yes",
    )
    delete.add_argument("source", help="source title or id")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_document_commands(sub)


def add_document_commands(sub: Any) -> None:
    documents = sub.add_parser(
        "documents",
        help="list, show or delete documents",
        description="List, show or delete documents.",
        epilog="examples:\n  archivist documents list --source Notes\n  archivist documents get ID --json",
    )
    ops = documents.add_subparsers(dest="op", required=True, metavar="{list,get,delete}")
    listing = ops.add_parser("list", help="list documents, oldest first", description="List documents, oldest first.")
    listing.add_argument("--source", default=None, help="only this source (title or id)")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    get = ops.add_parser("get", help="show a document and its text", description="Show a document and its text.")
    get.add_argument("id", help="document id (see: archivist documents list)")
    get.add_argument("--json", action="store_true", help="print JSON for scripts")
    delete = ops.add_parser("delete", help="delete a document", description="Delete a document and its chunks.")
    delete.add_argument("id", help="document id (see: archivist documents list)")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def confirm(question: str, yes: bool) -> None:
    """Go ahead with --yes, or when the user says so on a terminal; otherwise stop."""
    if yes:
        return
    if not sys.stdin.isatty():
        usage(f"{question} Refusing without confirmation.", "Add --yes to confirm.")
    if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
        fail("cancelled", code=1)


async def all_pages(fetch: Any) -> list[Any]:
    items, page_no = [], 1
    while True:
        page = await fetch(page_no)
        items.extend(page.items)
        if not page.has_more:
            return items
        page_no += 1


async def cli_sources(app: Archivist, args: argparse.Namespace) -> None:
    if args.op == "delete":
        await delete_source(app, args)
        return
    sources = await all_pages(lambda n: app.sources.list(n, 20))
    counts = await app.sources.counts([s.id for s in sources]) if sources else {}
    empty = {"documents_count": 0, "chunks_count": 0}
    if args.json:
        print_json([{**s.model_dump(mode="json"), **counts.get(s.id, empty)} for s in sources])
        return
    if not sources:
        say(EMPTY_SOURCES)
        return
    rows = [
        [s.title, s.source_type, s.version, counts.get(s.id, empty)["documents_count"],
         counts.get(s.id, empty)["chunks_count"], when(s.updated_at), s.id]
        for s in sources
    ]  # fmt: skip
    print_table(
        ["title", "type", "version", "documents", "chunks", "updated", "id"], rows, right=["documents", "chunks"]
    )


async def delete_source(app: Archivist, args: argparse.Namespace) -> None:
    source = await app.sources.resolve(args.source)
    stats = await app.sources.stats(source.id)
    confirm(f"Delete source '{source.title}' with {stats.documents_count} documents?", args.yes)
    removed = await app.sources.delete(source.id)
    say(f"deleted source '{removed['title']}': {removed['documents_deleted']} documents, "
        f"{removed['chunks_deleted']} chunks")  # fmt: skip


async def cli_documents(app: Archivist, args: argparse.Namespace) -> None:
    if args.op == "get":
        await show_document(app, args)
    elif args.op == "delete":
        document = await app.documents.get(args.id)
        confirm(f"Delete document '{document.title}'?", args.yes)
        removed = await app.documents.delete(document.id)
        say(f"deleted document '{removed['title']}' ({removed['chunks_deleted']} chunks)")
    else:
        await list_documents(app, args)


async def list_documents(app: Archivist, args: argparse.Namespace) -> None:
    source_id = (await app.sources.resolve(args.source)).id if args.source else None
    documents = await all_pages(lambda n: app.documents.list(source_id, n, 20))
    if args.json:
        print_json(documents)
        return
    if not documents:
        say("No documents yet. Add some with: archivist ingest PATH --source NAME")
        return
    rows = [[d.title, d.document_type, d.chunk_count, when(d.updated_at), d.url, d.id] for d in documents]
    print_table(["title", "type", "chunks", "updated", "url", "id"], rows, right=["chunks"])


async def show_document(app: Archivist, args: argparse.Namespace) -> None:
    document = await app.documents.get(args.id)
    text = await full_text(app, document)
    if args.json:
        print_json({**document.model_dump(mode="json"), "content": text})
        return
    source = await app.sources.get(document.source_id)
    say(f"{document.title}\n{document.url or ''}\nsource: {source.title}  type: {document.document_type}  "
        f"chunks: {document.chunk_count}  updated: {when(document.updated_at)}\n")  # fmt: skip
    print(text)


async def full_text(app: Archivist, document: Any) -> str:
    parts, offset = [], 0
    while True:
        window = await app.documents.read_window(document.id, offset)
        parts.append(window.text)
        if window.next_offset is None:
            return "".join(parts)
        offset = window.next_offset
