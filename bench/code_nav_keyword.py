"""The keyword leg over synced code with its postings unmerged: latency and exactness with a large delta.

    nice -n 10 .venv/bin/python bench/code_nav_keyword.py [--subset]   # on a `bench/code_nav.py --keep` source

Writes append their keyword postings to term_delta; a worker folds them into blocks later
(services/search/merge.py), and during a bulk sync that merge waits until the writes pause. Every search
reads the delta as well, so results are exact at every moment, but each delta row of a query term is read.
This measures what that costs: keyword searches (`search_type="keyword"`, one source) timed with the
source's postings all in term_delta, then the merge that folds them (wall and PostgreSQL CPU), then the
same searches with everything in blocks, whose chunk ids and scores must be the same.

`delta_section` is what bench/code_nav.py runs right after its sync (the delta is what the sync left);
run alone, this script first moves a kept source's postings from blocks back into term_delta in chunk
order (the order a sync writes them, so each term's rows lie scattered as they would), the worst case: a
whole million-line sync waiting in the delta.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from uuid import UUID

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.code_nav_symbols import percentile, postgres_cpu  # noqa: E402
from bench.common import CACHE_DIR  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402

#: identifiers, words and phrases an agent asks of code, from rare names to the commonest words of Python
QUERIES = [
    "copytree", "TaskGroup", "merge cookies", "HTTPConnection request", "raise ValueError", "self",
    "return None", "import os", "def __init__ self", "assertEqual", "deprecated", "struct pack",
    "subprocess run", "yield from", "async def", "os path join", "property", "KeyError IndexError",
    "slots", "main",
]  # fmt: skip
RUNS = 3  # timed calls per query (after one warm-up)
UNMERGE_SQL = """
WITH moved AS (
    INSERT INTO term_delta (term, source_id, seq, tf, impact)
    SELECT b.term, b.source_id, u.seq, coalesce(u.tf, 1::smallint), u.impact
    FROM term_blocks b
    CROSS JOIN LATERAL unnest(b.seqs, b.tfs, bm25_block_impacts(b.impacts, b.impact_max, b.n)) AS u(seq, tf, impact)
    WHERE b.source_id = $1 AND NOT EXISTS (SELECT 1 FROM term_dead d WHERE d.term = b.term AND d.seq = u.seq)
    ORDER BY u.seq, b.term
    RETURNING 1
)
SELECT count(*) FROM moved
"""


async def unmerge(app: Archivist, source_id: UUID) -> int:
    """Move the source's postings from blocks back into term_delta, as an unmerged sync leaves them."""
    async with app.db.pool.acquire() as conn, conn.transaction():
        moved = int(await conn.fetchval(UNMERGE_SQL, source_id))
        await conn.execute("DELETE FROM term_blocks WHERE source_id = $1", source_id)
        await conn.execute("DELETE FROM term_dead WHERE source_id = $1", source_id)
        await conn.execute("UPDATE chunk_seqs SET merged = false WHERE source_id = $1 AND merged", source_id)
    await app.db.pool.execute("VACUUM ANALYZE term_delta")
    await app.db.pool.execute("VACUUM ANALYZE term_blocks")
    return moved


async def keyword_pass(app: Archivist, source_id: UUID) -> tuple[list[float], dict[str, list[tuple[UUID, float]]]]:
    """Milliseconds of every timed call, and each query's ranking (chunk id, score)."""
    times: list[float] = []
    rankings: dict[str, list[tuple[UUID, float]]] = {}
    for query in QUERIES:
        outcome = await app.search.search(query, source_id=source_id, match_count=10, search_type="keyword")
        rankings[query] = [(h.chunk_id, h.score) for h in outcome.hits]
        for _ in range(RUNS):
            start = time.perf_counter()
            await app.search.search(query, source_id=source_id, match_count=10, search_type="keyword")
            times.append((time.perf_counter() - start) * 1000)
    return times, rankings


def same(a: list[tuple[UUID, float]], b: list[tuple[UUID, float]]) -> bool:
    return [i for i, _ in a] == [i for i, _ in b] and all(
        abs(x - y) <= 1e-9 * max(1.0, abs(x)) for (_, x), (_, y) in zip(a, b, strict=True)
    )


async def delta_section(app: Archivist, source_id: UUID) -> list[str]:
    """Keyword latency with the delta as it is, the merge timed, then again merged; rankings compared."""
    waiting = await app.db.pool.fetchval("SELECT count(*) FROM term_delta")
    merged = await app.db.pool.fetchval("SELECT coalesce(sum(n), 0) FROM term_blocks")
    before, ranked = await keyword_pass(app, source_id)
    start, cpu = time.perf_counter(), postgres_cpu(app.settings.data_dir)
    async with app.db.pool.acquire() as conn:
        await conn.execute("SET statement_timeout = 0")
        folded = await conn.fetchval("SELECT bm25_merge()")
        await conn.execute("RESET statement_timeout")
    seconds, after_cpu = time.perf_counter() - start, postgres_cpu(app.settings.data_dir)
    cpu_text = f", {after_cpu - cpu:.1f} s PostgreSQL CPU" if cpu is not None and after_cpu is not None else ""
    await app.db.pool.execute("VACUUM ANALYZE term_blocks")
    await app.db.pool.execute("VACUUM ANALYZE term_delta")
    after, again = await keyword_pass(app, source_id)
    agree = sum(same(ranked[q], again[q]) for q in QUERIES)
    return [
        f"keyword, {len(QUERIES)} queries x {RUNS} on the source, {waiting} postings waiting in term_delta "
        f"({merged} in blocks): p50 {statistics.median(before):.1f} ms, p95 {percentile(before, 0.95):.1f} ms",
        f"postings merge after the sync: {folded} folded in {seconds:.1f} s{cpu_text}",
        f"keyword, merged: p50 {statistics.median(after):.1f} ms, p95 {percentile(after, 0.95):.1f} ms; "
        f"rankings (ids and scores) the same for {agree} of {len(QUERIES)} queries",
    ]


async def main(args: argparse.Namespace) -> None:
    settings = Settings(
        _env_file=None,
        data_dir=CACHE_DIR / ("code-nav-subset-db" if args.subset else "code-nav-db"),
        run_worker=False,
    )
    app = await Archivist.open(settings)
    try:
        with use_scope(Scope.owner("bench")):
            source_id = await app.db.pool.fetchval("SELECT id FROM sources WHERE title LIKE 'bench-code-nav-%'")
            if source_id is None:
                raise SystemExit("no kept source: run bench/code_nav.py --keep first")
            merged, _ = await keyword_pass(app, source_id)
            print(f"keyword, merged at the start: p50 {statistics.median(merged):.1f} ms, "
                  f"p95 {percentile(merged, 0.95):.1f} ms")  # fmt: skip
            start = time.perf_counter()
            moved = await unmerge(app, source_id)
            print(f"moved {moved} postings back into term_delta in {time.perf_counter() - start:.1f} s")
            print("\n".join(await delta_section(app, source_id)))
            print(f"load average {os.getloadavg()[0]:.1f} (2 cores)")
    finally:
        await app.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", action="store_true")
    asyncio.run(main(parser.parse_args()))
