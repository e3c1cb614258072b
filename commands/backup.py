"""`archivist backup FILE`, `archivist restore FILE` and `archivist export SOURCE DIR`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.core.settings import Settings


def add_backup_commands(sub: Any) -> None:
    backup = sub.add_parser(
        "backup",
        help="write the whole knowledge base to one file (pg_dump)",
        description="Write every source, document, chunk, profile and token to one compressed file.",
        epilog="example:\n  archivist backup ~/archivist-2026-11-25.backup",
    )
    backup.add_argument("file", type=Path, help="the backup file to write")
    restore = sub.add_parser(
        "restore",
        help="restore a knowledge base from a backup file (pg_restore)",
        description="Restore a backup into this knowledge base (an empty one, unless --force).",
        epilog="examples:\n  archivist --data-dir ~/kb2 restore kb.backup\n  archivist restore kb.backup --force",
    )
    restore.add_argument("file", type=Path, help="a file written by `archivist backup`")
    restore.add_argument("--force", action="store_true", help="replace a knowledge base that is not empty")
    restore.add_argument(
        "--reembed", action="store_true", help="re-embed every chunk when the backup used another embedding model"
    )
    export = sub.add_parser(
        "export",
        help="write a source's documents out as markdown files",
        description="Write each document of a source as a markdown file with front matter (title, url, dates).",
        epilog='example:\n  archivist export "Python docs" ~/export/python-docs',
    )
    export.add_argument("source", help="the source's title or id")
    export.add_argument("directory", type=Path, help="a new or empty directory to write into")


@contextmanager
def table_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar over tables (on stderr), with its total."""
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("tables"), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def counts_line(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {name}" for name, n in counts.items())


async def run_backup(args: argparse.Namespace, settings: Settings) -> None:
    from services.documents.backup import backup

    with table_progress("backup") as progress:
        report = await backup(settings, args.file, progress)
    print(f"Backed up {counts_line(report.counts)} to {report.path} ({report.bytes / 1e6:.1f} MB).")


async def run_restore(args: argparse.Namespace, settings: Settings) -> None:
    from services.documents.backup import restore

    with table_progress("restore") as progress:
        report = await restore(settings, args.file, force=args.force, reembed=args.reembed, progress=progress)
    print(f"Restored {counts_line(report.counts)} from {report.path}.")


async def run_export(args: argparse.Namespace, settings: Settings) -> None:
    from services.app import Archivist
    from services.documents.export import export_source

    app = await Archivist.open(settings)
    try:
        source = await app.sources.resolve(args.source)
        report = await export_source(app.db, source.id, source.title, args.directory)
    finally:
        await app.close()
    print(f"Exported {len(report.written):,} documents of '{source.title}' to {report.directory}.")


BACKUP_COMMANDS = {"backup": run_backup, "restore": run_restore, "export": run_export}


def run_backup_command(args: argparse.Namespace, settings: Settings) -> None:
    asyncio.run(BACKUP_COMMANDS[args.command](args, settings))
