"""When the worker folds keyword postings into blocks (services/search/merge.py): writes that keep coming
wait for their pause (or the threshold, counted without reading the delta), and searches are exact
whatever waits."""

from __future__ import annotations

import itertools
import string

import pytest

from services.app import Archivist
from services.core.settings import Settings
from services.search import bm25_index
from services.search.merge import PostingsMerger

POSTINGS = "SELECT term, chunk_id, source_id, tf, dl FROM chunk_postings"
DELTA = "SELECT (SELECT count(*) FROM term_delta) + (SELECT count(*) FROM term_dead)"
WORDS = ("".join(w) for w in itertools.product(string.ascii_lowercase, repeat=4))


def words(n: int) -> str:
    """n distinct made-up words (each its own lexeme)."""
    return " ".join("q" + next(WORDS) for _ in range(n))


async def add(app: Archivist, source_id: object, n: int) -> None:
    await app.documents.ingest(source_id, f"d{n}", words(n), "markdown", None, embed=False)


@pytest.mark.usefixtures("owner")
async def test_the_backlog_bounds_the_delta_from_above_without_reading_it(app: Archivist) -> None:
    source = await app.sources.create("merge count")
    merger = PostingsMerger(app.db, threshold=10**6)
    await add(app, source.id, 40)
    await add(app, source.id, 25)
    size, last_seq, waiting = await merger.backlog()
    assert waiting and size >= await app.db.pool.fetchval(DELTA) == await merger.waiting() > 60
    await merger.step()
    assert await merger.step() > 0  # paused: merged
    assert await merger.backlog() == (0, last_seq, False)
    await app.db.pool.execute("DELETE FROM documents WHERE title = 'd25'")  # merged postings die
    size, _, waiting = await merger.backlog()
    assert waiting and size == await app.db.pool.fetchval(DELTA) == await merger.waiting() > 0


@pytest.mark.usefixtures("owner")
async def test_writes_that_keep_coming_wait_for_their_pause(app: Archivist) -> None:
    source = await app.sources.create("merge bulk")
    merger = PostingsMerger(app.db, threshold=Settings.model_fields["bm25_merge_postings"].default)
    await merger.step()  # whatever earlier tests left
    await merger.step()
    before = set(await app.db.pool.fetch(POSTINGS))
    for n in (60_000, 30, 30):  # a sync storing file after file: more at every check, nothing merged
        await add(app, source.id, n)  # (60,000 postings: past the 50,000 at which merges ran during syncs)
        assert await merger.step() == 0
    during = set(await app.db.pool.fetch(POSTINGS))
    assert len(during - before) >= 60_000  # searches read them from the delta meanwhile
    assert await merger.step() >= 60_000  # paused: all of it at once
    assert await merger.waiting() == 0
    assert set(await app.db.pool.fetch(POSTINGS)) == during


@pytest.mark.usefixtures("owner")
async def test_the_threshold_merges_while_writes_go_on(app: Archivist) -> None:
    source = await app.sources.create("merge threshold")
    merger = PostingsMerger(app.db, threshold=40)
    await merger.step()
    await merger.step()
    await add(app, source.id, 12)
    assert await merger.step() == 0  # under the threshold, still writing
    await add(app, source.id, 40)
    assert await merger.step() >= 45  # at the threshold: merged though writes go on
    assert await merger.waiting() == 0


@pytest.mark.usefixtures("owner")
async def test_a_merge_that_empties_the_delta_gives_back_its_index_pages(app: Archivist) -> None:
    source = await app.sources.create("merge shrink")
    merger = PostingsMerger(app.db, threshold=10**6, delta_index_slack=256 << 10)
    await merger.step()
    await merger.step()
    size = "SELECT pg_indexes_size('term_delta')"
    empty = await app.db.pool.fetchval(size)
    await add(app, source.id, 20_000)
    grown = await app.db.pool.fetchval(size)
    assert grown > empty + (256 << 10)
    before = set(await app.db.pool.fetch(POSTINGS))
    await merger.step()
    assert await merger.step() >= 20_000  # paused: merged, the delta emptied
    assert await app.db.pool.fetchval(size) <= empty + (64 << 10)  # its indexes rebuilt, not kept at their peak
    assert set(await app.db.pool.fetch(POSTINGS)) == before
    assert (
        await app.db.pool.fetchval(
            "SELECT count(*) FROM pg_index WHERE indrelid = 'term_delta'::regclass AND indisvalid"
        )
        == 2
    )
    await add(app, source.id, 30)  # the delta takes writes again through its new indexes
    assert await merger.waiting() == 30


@pytest.mark.usefixtures("owner")
async def test_the_first_check_shrinks_indexes_an_earlier_merge_left_large(app: Archivist) -> None:
    source = await app.sources.create("merge shrink at start")
    await PostingsMerger(app.db, threshold=10**6).step()  # whatever earlier tests left
    size = "SELECT pg_indexes_size('term_delta')"
    await add(app, source.id, 20_001)
    async with app.db.pool.acquire() as conn:
        assert await bm25_index.merge(conn) >= 20_001  # as before this change: the pages stay
    grown = await app.db.pool.fetchval(size)
    assert grown > 512 << 10
    merger = PostingsMerger(app.db, threshold=10**6, delta_index_slack=256 << 10)
    assert await merger.step() == 0  # nothing to merge, yet the indexes are rebuilt
    assert await app.db.pool.fetchval(size) < grown // 4


@pytest.mark.usefixtures("owner")
async def test_the_first_check_adds_back_keys_a_stopped_rebuild_dropped(app: Archivist) -> None:
    keys = "SELECT count(*) FROM pg_constraint WHERE conrelid = 'chunk_seqs'::regclass AND contype IN ('p', 'u')"
    await app.db.pool.execute("SELECT bm25_rebuild_clear()")  # a rebuild's first step, then nothing
    assert await app.db.pool.fetchval(keys) == 0
    await PostingsMerger(app.db, threshold=10**6).step()
    assert await app.db.pool.fetchval(keys) == 2
    async with app.db.pool.acquire() as conn:
        await bm25_index.rebuild(conn)  # the postings as they were
