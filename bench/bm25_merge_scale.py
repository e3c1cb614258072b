"""The keyword postings merge when a whole source is replaced: time against size (issue 36).

    nice -n 10 .venv/bin/python bench/bm25_merge_scale.py --chunks 1000,2000,4000,8000

Re-syncing a code source as a new one (or `bench/code_nav.py` after a kept run) deletes a source whose
postings are all merged into blocks (each becomes a term_dead row) and writes a new one (each posting a
term_delta row); one `bm25_merge` then folds both. For each size: source A's chunks (pieces of the
standard library's files, as the code chunker cuts them roughly) are inserted and merged, then A is
deleted and B (the same texts: a re-sync) inserted, and that merge is timed, with the postings it leaves
compared with a rebuild's (`bm25_rebuild`, the reference). `--leave` stops before the last merge, to study
its statements by hand. `--kept` does it to the source a `bench/code_nav.py --keep` run left (the whole
standard library): its chunks copied into a new source, the old one deleted, one merge timed.
`--routine-ab` times small merges there (5 chunks re-indexed, one merge) with sql/048's function and
sql/054's alternated, six of each (it leaves sql/054's in place).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.code_nav import stdlib_files  # noqa: E402
from bench.code_nav_symbols import postgres_cpu  # noqa: E402
from bench.common import CACHE_DIR  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.database import migration_file  # noqa: E402
from services.core.settings import Settings  # noqa: E402

PIECE = 1500  # characters a chunk (the code chunker's pieces are of this order)
BATCH = 500  # chunks an INSERT (the triggers run per statement, as a sync's batches do)
#: every live posting (impacts aside: a rebuild computes them from today's average length) and the blocks'
#: shape per term and source
POSTINGS = "SELECT term, chunk_id, source_id, tf, dl FROM chunk_postings ORDER BY 1, 2"
BLOCKS = "SELECT term, source_id, count(*), sum(n) FROM term_blocks GROUP BY 1, 2 ORDER BY 1, 2"


def pieces(count: int) -> list[tuple[str, str]]:
    """(path, text) pieces of the standard library, `count` of them."""
    out: list[tuple[str, str]] = []
    for path, text in stdlib_files(None).items():
        for start in range(0, len(text), PIECE):
            out.append((path, text[start : start + PIECE]))
            if len(out) == count:
                return out
    return out


async def insert_source(app: Archivist, title: str, chunks: list[tuple[str, str]]) -> str:
    source = await app.sources.create(title)
    async with app.db.pool.acquire() as conn:
        doc = await conn.fetchval(
            "INSERT INTO documents (source_id, title, content, content_hash) VALUES ($1, $2, '', '') RETURNING id",
            source.id,
            title,
        )
        for start in range(0, len(chunks), BATCH):
            batch = chunks[start : start + BATCH]
            await conn.execute(
                "INSERT INTO chunks (document_id, source_id, chunk_index, text, char_start, char_end, context) "
                "SELECT $1, $2, i, t, 0, length(t), p FROM unnest($3::text[], $4::text[], $5::int[]) AS u(p, t, i)",
                doc,
                source.id,
                [p for p, _ in batch],
                [t for _, t in batch],
                list(range(start, start + len(batch))),
            )
    return str(source.id)


async def merge(app: Archivist) -> tuple[int, float, float | None]:
    cpu = postgres_cpu(app.settings.data_dir)
    start = time.perf_counter()
    async with app.db.pool.acquire() as conn, conn.transaction():
        folded = await conn.fetchval("SELECT bm25_merge(128)")
    seconds = time.perf_counter() - start
    after = postgres_cpu(app.settings.data_dir)
    return folded, seconds, (after - cpu if cpu is not None and after is not None else None)


async def run_size(app: Archivist, count: int, check: bool, leave: bool = False) -> str:
    for row in await app.db.pool.fetch("SELECT id FROM sources WHERE title LIKE 'merge-scale-%'"):
        await app.sources.delete(row["id"])
    await merge(app)
    chunks = pieces(count)
    a = await insert_source(app, "merge-scale-a", chunks)
    await merge(app)
    await app.db.pool.execute("VACUUM ANALYZE term_blocks")
    await app.db.pool.execute("VACUUM ANALYZE term_delta")
    await app.sources.delete(a)
    await insert_source(app, "merge-scale-b", chunks)
    dead = await app.db.pool.fetchval("SELECT count(*) FROM term_dead")
    new = await app.db.pool.fetchval("SELECT count(*) FROM term_delta")
    if leave:
        return f"{len(chunks)} chunks: {dead} dead + {new} new postings left unmerged"
    folded, seconds, cpu = await merge(app)
    line = f"{len(chunks)} chunks: {dead} dead + {new} new postings merged ({folded}) in {seconds:.1f} s"
    if cpu is not None:
        line += f" (PostgreSQL CPU {cpu:.1f} s)"
    if check:
        merged = [await app.db.pool.fetch(q) for q in (POSTINGS, BLOCKS)]
        async with app.db.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT bm25_rebuild(128)")
        rebuilt = [await app.db.pool.fetch(q) for q in (POSTINGS, BLOCKS)]
        same = [[tuple(r) for r in rows] for rows in merged] == [[tuple(r) for r in rows] for rows in rebuilt]
        line += f"; postings and blocks as a rebuild's: {same}"
    return line


COPY_SQL = (
    "INSERT INTO chunks (document_id, source_id, chunk_index, text, char_start, char_end, heading_path, context) "
    "SELECT $1, $2, $4 + row_number() OVER (ORDER BY id), text, char_start, char_end, heading_path, context "
    "FROM chunks WHERE id = ANY($3::uuid[])"
)


async def replace_kept(app: Archivist) -> str:
    """The kept code-nav source replaced by a copy of its chunks, and the merge that folds both timed."""
    old = await app.db.pool.fetchval("SELECT id FROM sources WHERE title LIKE 'bench-code-nav-%' LIMIT 1")
    if old is None:
        raise SystemExit("no source kept by bench/code_nav.py --keep in this database")
    await merge(app)
    new = (await app.sources.create("merge-scale-replacement")).id
    doc = await app.db.pool.fetchval(
        "INSERT INTO documents (source_id, title, content, content_hash) VALUES ($1, 'all', '', '') RETURNING id", new
    )
    ids = [r["id"] for r in await app.db.pool.fetch("SELECT id FROM chunks WHERE source_id = $1 ORDER BY id", old)]
    for start in range(0, len(ids), 2000):
        await app.db.pool.execute(COPY_SQL, doc, new, ids[start : start + 2000], start)
    await app.db.pool.execute("VACUUM ANALYZE term_blocks")
    await app.sources.delete(old)
    dead = await app.db.pool.fetchval("SELECT count(*) FROM term_dead")
    added = await app.db.pool.fetchval("SELECT count(*) FROM term_delta")
    folded, seconds, cpu = await merge(app)
    left = await app.db.pool.fetchval("SELECT count(*) FROM term_blocks WHERE source_id = $1", old)
    return (
        f"kept source ({len(ids)} chunks) replaced: {dead} dead + {added} new postings merged ({folded}) in "
        f"{seconds:.1f} s (PostgreSQL CPU {cpu or 0:.1f} s); blocks of the deleted source left: {left}"
    )


def merge_function(number: str) -> str:
    """The bm25_merge definition of one migration."""
    text = migration_file(number).read_text()
    start = text.index("CREATE OR REPLACE FUNCTION bm25_merge")
    return text[start : text.index("$$;", start) + 3]


async def routine_ab(app: Archivist, rounds: int = 6) -> str:
    """Small merges, sql/048's function against sql/054's, alternated."""
    times: dict[str, list[float]] = {"048": [], "054": []}
    for round_ in range(rounds):
        order = ("048", "054") if round_ % 2 == 0 else ("054", "048")
        for number in order:
            await app.db.pool.execute(merge_function(number))
            ids = [r["id"] for r in await app.db.pool.fetch("SELECT id FROM chunks ORDER BY random() LIMIT 5")]
            await app.db.pool.execute("UPDATE chunks SET text = text || ' x' WHERE id = ANY($1::uuid[])", ids)
            _, seconds, _ = await merge(app)
            times[number].append(seconds)
    await app.db.pool.execute(merge_function("054"))
    return "; ".join(f"sql/{n}: median {statistics.median(t) * 1000:.0f} ms" for n, t in times.items())


async def main(args: argparse.Namespace) -> None:
    db = "code-nav-db" if args.kept or args.routine_ab else "merge-scale-db"
    settings = Settings(_env_file=None, data_dir=CACHE_DIR / db, run_worker=False)
    app = await Archivist.open(settings)
    try:
        with use_scope(Scope.owner("bench")):
            if args.kept or args.routine_ab:
                print(await (replace_kept(app) if args.kept else routine_ab(app)), flush=True)
                return
            for count in (int(c) for c in args.chunks.split(",")):
                print(await run_size(app, count, args.check, args.leave), flush=True)
    finally:
        await app.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", default="1000,2000,4000,8000", help="chunks a source, comma-separated sizes")
    parser.add_argument("--leave", action="store_true", help="stop before the last merge (to study it by hand)")
    parser.add_argument("--kept", action="store_true", help="replace the source bench/code_nav.py --keep left")
    parser.add_argument("--routine-ab", action="store_true", help="small merges there, sql/048 against sql/054")
    parser.add_argument("--check", action="store_true", help="compare the merged blocks with a rebuild's")
    asyncio.run(main(parser.parse_args()))
