"""Where the code ingest's time goes: the sync of bench/code_nav.py with one part left out at a time.

    nice -n 10 .venv/bin/python bench/code_nav_ingest.py --subset --variants as_is,no_trigram_index,no_lines

Each variant syncs the same files (the standard library, `--subset`: every 8th file) into its own new
embedded database and prints the wall time and the CPU seconds of this process (parse, chunk, symbols:
the worker runs in it) and of PostgreSQL. The difference from `as_is` is what the left-out part costs:
- `no_trigram_index`: grep's trigram GIN dropped before the sync (its row-by-row upkeep);
- `no_lines`: no line index at all (services/code/lines.py `write_lines` a no-op);
- `no_symbols`: no symbol table (services/code/symbol_store.py `write_symbols` a no-op);
- `no_merge`: the worker's keyword postings merge never runs during the sync.
Variants are not interleaved (a sync each): run them back to back, and twice when the load moves.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.code_nav import SUBSET_EVERY, TITLE, postgres_cpu, stdlib_files, sync_until_stored  # noqa: E402
from bench.common import CACHE_DIR  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.code.lines import split_lines  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.documents import ingest as ingest_module  # noqa: E402
from tests.support.git_server import GitServer  # noqa: E402


async def nothing(*_: Any, **__: Any) -> None:
    return None


async def run_variant(variant: str, server: GitServer, lines: int) -> str:
    data_dir = CACHE_DIR / f"code-nav-ingest-{variant}"
    shutil.rmtree(data_dir, ignore_errors=True)
    settings = Settings(
        _env_file=None,
        data_dir=data_dir,
        git_allow_private=True,
        job_poll_seconds=0.05,
        run_worker=False,
        bm25_merge_postings=10**12 if variant == "no_merge" else Settings.model_fields["bm25_merge_postings"].default,
    )
    patched = {"no_lines": "write_lines", "no_symbols": "write_symbols"}.get(variant)
    original = getattr(ingest_module, patched) if patched else None
    if patched:
        setattr(ingest_module, patched, nothing)
    app = await Archivist.open(settings)
    try:
        with use_scope(Scope.owner("bench")):
            if variant == "no_trigram_index":
                await app.db.pool.execute("DROP INDEX code_blocks_words_idx")
            config, _ = await app.git.bind(server.url("stdlib"), title=f"{TITLE}-ingest")
            cpu, pg = time.process_time(), postgres_cpu(data_dir)
            seconds = await sync_until_stored(app, config.source_id)
            cpu, pg_after = time.process_time() - cpu, postgres_cpu(data_dir)
            pg_cpu = f"{pg_after - pg:.1f}" if pg is not None and pg_after is not None else "?"
            return (
                f"{variant}: {seconds:.1f} s wall ({lines / seconds:.0f} lines/s), CPU {cpu:.1f} s here, "
                f"{pg_cpu} s PostgreSQL; load {os.getloadavg()[0]:.1f}"
            )
    finally:
        await app.close()
        if patched:
            setattr(ingest_module, patched, original)
        shutil.rmtree(data_dir, ignore_errors=True)


async def main(args: argparse.Namespace) -> None:
    files = stdlib_files(None, SUBSET_EVERY if args.subset else 1)
    lines = sum(len(split_lines(t)) for t in files.values())
    print(f"{len(files)} files, {lines} lines, {sum(len(t.encode()) for t in files.values()) / 1e6:.1f} MB")
    root = CACHE_DIR / "code-nav-ingest-repos"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    server = GitServer(root, "unused")
    server.add("stdlib").commit(files, "the standard library")
    try:
        for variant in args.variants.split(","):
            print(await run_variant(variant, server, lines), flush=True)
    finally:
        server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", action="store_true")
    parser.add_argument("--variants", default="as_is,no_trigram_index,no_lines,no_symbols,no_merge")
    asyncio.run(main(parser.parse_args()))
