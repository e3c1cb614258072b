"""`archivist flags`: the chunks whose text speaks to an agent rather than a reader (services/flags).

`archivist flags --source S` lists a source's flagged chunks; `archivist flags scan` scans the chunks
stored before flags existed now (every worker also does it in the background), `scan --all` scans every
chunk again, after the rules changed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from commands.output import print_json, print_table, say
from services.flags.store import FlagStore

if TYPE_CHECKING:
    from services.app import Archivist


def add_flags_command(sub: Any) -> None:
    flags = sub.add_parser(
        "flags",
        help="list chunks with injection flags, or scan chunks for them",
        description="List a source's chunks flagged as speaking to an agent (hidden text, instructions to "
        "assistants, tool-call or system-prompt text, remote scripts piped to a shell), or scan chunks.",
        epilog="examples:\n  archivist flags --source Django\n  archivist flags scan\n  archivist flags scan --all",
    )
    flags.add_argument("--source", default=None, help="source title or id (required to list)")
    flags.add_argument("--page", type=int, default=1, help="page of 20 chunks")
    flags.add_argument("--json", action="store_true", help="print JSON for scripts")
    ops = flags.add_subparsers(dest="op", metavar="{scan}")
    scan = ops.add_parser("scan", help="scan unscanned chunks now", description="Scan chunks for injection flags.")
    scan.add_argument("--all", action="store_true", help="scan every chunk again (after the rules changed)")


async def cli_flags(app: Archivist, args: argparse.Namespace) -> None:
    store = FlagStore(app.db)
    if getattr(args, "op", None) == "scan":
        done = await (store.rescan() if args.all else store.scan_unscanned())
        say(f"scanned {done} chunks")
        return
    if not args.source:
        say("Name a source: archivist flags --source NAME (or scan: archivist flags scan)")
        return
    source = await app.sources.resolve(args.source)
    rows, total = await store.flagged(source.id, max(args.page, 1))
    if args.json:
        print_json({"source_id": source.id, "total_count": total, "chunks": rows})
        return
    if not rows:
        say(f"No flagged chunks in {source.title}.")
        return
    table = [
        [", ".join(r["flags"]), r["document_title"][:60], r["chunk_index"], " ".join(r["text"].split())[:80]]
        for r in rows
    ]
    print_table(["flags", "document", "chunk", "text"], table, right=["chunk"])
    say(f"{total} flagged chunks in {source.title} (page {args.page}).")
