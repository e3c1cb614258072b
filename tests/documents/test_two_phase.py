"""Two-phase indexing (issue 18): chunks are keyword-searchable before they are embedded, the embedding
backlog lives in PostgreSQL (survives a kill -9, nothing embedded twice), job and source replies say
how fresh the index is, and an update never leaves a reader with neither version of a document."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import pytest
import pytest_asyncio

from models.jobs import CrawlRequest
from services.app import Archivist, run_worker
from services.documents import NewDocument, embedding_text
from services.documents.backlog import BATCH as BACKLOG_BATCH
from services.embeddings.base import Embedder
from services.embeddings.gate import embed_in_slices
from tests.conftest import make_settings
from tests.support.fixture_site import FixtureSite
from tools.crawl_website import job_message
from tools.manage_source import SourceArguments, get_source
from tools.search_knowledge_base import search_payload
from web.pages_add import job_json

ROOT = Path(__file__).resolve().parents[2]


class GatedEmbedder(Embedder):
    """The real embedder; document embedding waits (off the model gate, so searches still pass)
    while `held`, and each call can be slowed by `delay` seconds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.released = asyncio.Event()
        self.delay = 0.0
        self.texts = 0
        self.waiting = 0  # document embedding calls held at `released`

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    async def embed_documents_batched(self, texts: list[str]) -> np.ndarray:
        self.waiting += 1
        try:
            await self.released.wait()
        finally:
            self.waiting -= 1
        await asyncio.sleep(self.delay)
        self.texts += len(texts)
        return await embed_in_slices(self.inner.embed_documents, texts, self.dim)


@pytest.fixture(scope="module")
def gated(embedder: Any) -> GatedEmbedder:
    return GatedEmbedder(embedder)


@pytest_asyncio.fixture(scope="module")
async def app(database_url: str, files_dir: Path, gated: GatedEmbedder) -> AsyncIterator[Archivist]:
    settings = make_settings(database_url, files_dir, crawl_delay_seconds=0, job_poll_seconds=0.1)
    archivist = await Archivist.open(settings, gated)
    yield archivist
    await archivist.close()


@pytest.fixture(autouse=True)
def embedding_released(gated: GatedEmbedder) -> Any:
    gated.released.set()
    gated.delay = 0.0
    yield
    gated.released.set()


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def notes(topic: str, word: str, paragraphs: int = 4, lines: int = 12) -> str:
    """A markdown note of `paragraphs` sections, each one chunk (`lines` lines: 12 ~1000 characters,
    3 ~260, still above the chunker's smallest chunk, so never merged)."""
    line = f"The {word} keeper logs the {topic} tides with lantern readings and harbour notes. "
    body = "\n\n".join(f"## {topic} part {i}\n\n" + line * lines for i in range(paragraphs))
    return f"# {topic}\n\n{body}"


async def doc_hits(app: Archivist, query: str, source_id: UUID, search_type: str = "hybrid") -> Any:
    return await app.search.search(query, source_id=source_id, search_type=search_type, match_count=10)


# ------------------------------------------------------------------ keyword before vectors


@pytest.mark.usefixtures("owner")
async def test_keyword_search_finds_chunks_before_they_are_embedded(app: Archivist, gated: GatedEmbedder) -> None:
    source, _ = await app.sources.get_or_create("two-phase notes")
    gated.released.clear()
    # the two-phase path (crawls, syncs, directories): stored at once, embedded by the backlog
    ingest = asyncio.create_task(
        app.documents.ingest(source.id, "Quokka", notes("quokka", "wombat"), "markdown", embed=False)
    )

    async def found() -> Any:
        outcome = await doc_hits(app, "quokka wombat tides", source.id)
        return outcome if outcome.hits and outcome.pending_embeddings else None  # (counted beside the search)

    hybrid = await until(found, what="a keyword hit on an unembedded chunk")
    stored = await asyncio.wait_for(ingest, 30)  # stored without waiting for the (held) embedder
    draining = asyncio.create_task(app.documents.backlog.drain([stored.document.id]))
    await asyncio.sleep(0.1)
    assert not draining.done()  # the embedder is held: nothing is embedded yet
    assert hybrid.pending_embeddings > 0 and {h.match_type for h in hybrid.hits} == {"keyword"}
    app.settings.hybrid_fusion = "rrf"  # the other fusion: a pending chunk counts its keyword rank twice
    try:
        rrf = await doc_hits(app, "quokka wombat tides", source.id)
    finally:
        app.settings.hybrid_fusion = "convex"
    assert [h.chunk_id for h in rrf.hits] == [h.chunk_id for h in hybrid.hits] and rrf.hits[0].score == 1.0
    rerank = await doc_hits(app, "quokka wombat tides", source.id, "rerank")
    assert rerank.hits and rerank.pending_embeddings == hybrid.pending_embeddings
    vector = await doc_hits(app, "quokka wombat tides", source.id, "vector")
    assert vector.hits == [] and vector.pending_embeddings == hybrid.pending_embeddings
    payload = search_payload(vector, "quokka wombat tides", "vector", 10)
    assert payload["pending_embeddings"] == hybrid.pending_embeddings
    assert "not embedded yet" in payload["note"]

    gated.released.set()
    await asyncio.wait_for(draining, 60)
    result = stored
    vector = await doc_hits(app, "quokka wombat tides", source.id, "vector")
    assert vector.pending_embeddings == 0 and {h.document_id for h in vector.hits} == {result.document.id}
    assert "pending_embeddings" not in search_payload(vector, "q", "vector", 10)
    hybrid = await doc_hits(app, "quokka wombat tides", source.id)
    assert hybrid.pending_embeddings == 0 and "hybrid" in {h.match_type for h in hybrid.hits}


# ------------------------------------------------------------------ job and source freshness


@pytest.mark.usefixtures("owner")
async def test_crawl_job_reports_searchable_pages_and_embedding_backlog(app: Archivist, gated: GatedEmbedder) -> None:
    site = FixtureSite(with_defaults=False).start()
    site.generate(12)
    app.documents.backlog.batch = 4  # small claims: the job is seen half embedded
    gated.released.clear()
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(app, stop, "two-phase"))
    try:
        started = await app.crawl.start(
            CrawlRequest(url=site.url_for("/gen/"), recursive=True, max_depth=5, max_pages=50)
        )
        job_id = started.job.id

        async def all_pages_stored() -> Any:
            job = await app.jobs.get(job_id)
            return job if job.pages_pending == 0 and job.pages_searchable == job.pages_crawled > 0 else None

        held = await until(all_pages_stored, 60, "every page stored while the embedder is held")
        assert held.status == "running" and held.pages_searchable == 13
        assert held.chunks_embedded == 0 and held.chunks_pending == held.total_chunks > 0
        assert held.embedding_eta_seconds is None  # nothing embedded yet: no rate
        said = f"embedded 0 / {held.total_chunks:,} chunks, time left not known yet"
        assert held.embedding_progress() == said  # one sentence, shown by every door:
        assert said in job_message(held) and job_json(held)["embedding_progress"] == said  # MCP, the console
        source = (await get_source(app, SourceArguments(action="get", source_id=str(held.source_id))))["source"]
        assert source["chunks_pending"] == held.chunks_pending
        assert (await doc_hits(app, "generated page", held.source_id)).hits

        gated.delay = 0.3
        gated.released.set()

        async def half_embedded() -> Any:
            job = await app.jobs.get(job_id)
            return job if job.chunks_embedded > 0 and job.chunks_pending > 0 else None

        mid = await until(half_embedded, 60, "a half-embedded job")
        assert mid.chunks_embedded + mid.chunks_pending == held.total_chunks
        assert mid.embedding_eta_seconds is not None and mid.embedding_eta_seconds > 0
        assert f"embedded {mid.chunks_embedded:,} / {held.total_chunks:,} chunks" in (mid.embedding_progress() or "")
        assert " left" in (mid.embedding_progress() or "") and "not known" not in (mid.embedding_progress() or "")
        job = await app.jobs.wait(job_id, 120, interval=0.1)
    finally:
        stop.set()
        await worker
        site.stop()
        app.documents.backlog.batch = 32
    assert job.status == "completed", job
    assert (job.chunks_pending, job.chunks_embedded, job.embedding_eta_seconds) == (0, job.total_chunks, 0)
    assert job.embedding_progress() is None and "Semantic search is still" not in job_message(job)
    assert job.pages_searchable == job.pages_crawled == 13
    stored = await get_source(app, SourceArguments(action="get", source_id=str(job.source_id)))
    assert stored["source"]["chunks_pending"] == 0


# ------------------------------------------------------------------ the backlog survives kill -9


EMBED_LOG = """
CREATE TABLE IF NOT EXISTS embed_log (chunk_id uuid NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION log_embedding() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO embed_log (chunk_id) VALUES (NEW.id); RETURN NULL; END $$;
DROP TRIGGER IF EXISTS chunks_embed_log ON chunks;
CREATE TRIGGER chunks_embed_log AFTER UPDATE OF embedding ON chunks
    FOR EACH ROW WHEN (NEW.embedding IS NOT NULL) EXECUTE FUNCTION log_embedding();
"""


def start_worker(database_url: str, files_dir: Path, name: str) -> subprocess.Popen[bytes]:
    """`archivist worker` in its own process (tests/support/crawl_worker_proc.py): it runs the backlog runner."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "ARCHIVIST_DATA_DIR": str(files_dir.parent / "data"),
        "ARCHIVIST_ALLOWED_PATHS": str(files_dir),
        "ARCHIVIST_JOB_POLL_SECONDS": "0.2",
    }
    log = (files_dir / f"{name}.log").open("wb")
    return subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "crawl_worker_proc.py"), name],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


@pytest.mark.usefixtures("owner")
async def test_backlog_survives_kill_9_and_nothing_is_embedded_twice(
    app: Archivist, embedder: Any, database_url: str, files_dir: Path
) -> None:
    await app.db.pool.execute(EMBED_LOG)
    source, _ = await app.sources.get_or_create("two-phase backlog")
    # short chunks: the backlog's size in chunks (several claims) is the point, not their length, and
    # two worker processes embed every one of them
    items = [NewDocument(f"Ledger {i}", notes(f"ledger{i}", f"heron{i}", 6, lines=3), "markdown") for i in range(24)]
    await app.documents.ingest_many(source.id, items, embed=False)
    pending_sql = "SELECT count(*) FROM chunks WHERE source_id = $1 AND embedding IS NULL"
    total = await app.db.pool.fetchval(pending_sql, source.id)
    assert total >= 96

    doomed = start_worker(database_url, files_dir, "doomed-embedder")
    try:

        async def some_embedded() -> bool:
            assert doomed.poll() is None, (files_dir / "doomed-embedder.log").read_text()[-3000:]
            return await app.db.pool.fetchval(pending_sql, source.id) < total

        await until(some_embedded, 120, "the worker process to embed a first batch")
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
    finally:
        if doomed.poll() is None:
            doomed.kill()
    left = await app.db.pool.fetchval(pending_sql, source.id)
    assert 0 < left < total, "killed mid-backlog"

    rescuer = start_worker(database_url, files_dir, "rescuer-embedder")
    try:

        async def drained() -> bool:
            assert rescuer.poll() is None, (files_dir / "rescuer-embedder.log").read_text()[-3000:]
            return await app.db.pool.fetchval(pending_sql, source.id) == 0

        await until(drained, 180, "the restarted worker to finish the backlog")
    finally:
        rescuer.send_signal(signal.SIGTERM)
        rescuer.wait(timeout=30)
    writes = await app.db.pool.fetchrow(
        "SELECT count(*) AS n, count(DISTINCT l.chunk_id) AS chunks FROM embed_log l "
        "JOIN chunks c ON c.id = l.chunk_id WHERE c.source_id = $1",
        source.id,
    )
    assert (writes["n"], writes["chunks"]) == (total, total)  # every chunk's vector written exactly once
    rows = await app.db.pool.fetch(
        "SELECT c.text, c.heading_path, c.embedding, c.embedded_at, d.title FROM chunks c "
        "JOIN documents d ON d.id = c.document_id WHERE c.source_id = $1 ORDER BY c.id LIMIT 6",
        source.id,
    )
    assert all(r["embedded_at"] is not None for r in rows)
    direct = embedder.embed_documents([embedding_text(r["title"], list(r["heading_path"]), r["text"]) for r in rows])
    stored = np.array([np.asarray(r["embedding"].to_list()) for r in rows])
    # The texts ingestion always embedded; the int8 model quantises activations per call, so a vector moves
    # slightly with the other texts of its call (cosine >= 0.99 on main too), never more.
    assert (stored * direct).sum(axis=1).min() > 0.98


# ------------------------------------------------------------------ updates stay atomic for readers


@pytest.mark.usefixtures("owner")
async def test_update_never_leaves_a_reader_with_neither_version(app: Archivist, gated: GatedEmbedder) -> None:
    source, _ = await app.sources.get_or_create("two-phase updates")
    old = await app.documents.ingest(source.id, "Pelican", notes("pelican", "lighthouse"), "markdown")
    seen: list[int] = []
    reading = True

    async def reader() -> None:
        while reading:
            outcome = await doc_hits(app, "pelican lighthouse tides", source.id)
            seen.append(sum(1 for h in outcome.hits if h.document_id == old.document.id))
            await asyncio.sleep(0)

    readers = [asyncio.create_task(reader()) for _ in range(2)]
    gated.released.clear()
    new_content = notes("pelican", "lighthouse") + "\n\nA cormorant colony nests below the lighthouse."
    update = asyncio.create_task(app.documents.update(old.document.id, content=new_content, embed=False))
    try:

        async def new_version_searchable() -> bool:
            outcome = await doc_hits(app, "cormorant colony", source.id)
            return any(h.document_id == old.document.id and "cormorant" in h.text for h in outcome.hits)

        await until(new_version_searchable, 30, "the new version to be keyword-searchable before its vectors")
        await asyncio.wait_for(update, 30)
        draining = asyncio.create_task(app.documents.backlog.drain([old.document.id]))
        await asyncio.sleep(0.1)
        assert not draining.done()  # its vectors wait for the (held) embedder
        gated.released.set()
        await asyncio.wait_for(draining, 60)
        await asyncio.sleep(0.2)
    finally:
        reading = False
        gated.released.set()
        await asyncio.gather(*readers)
    assert len(seen) > 5 and min(seen) > 0, seen
    assert (await doc_hits(app, "cormorant colony", source.id, "vector")).pending_embeddings == 0


# ------------------------------------------------------------------ boilerplate embedded once per claim


@pytest.mark.usefixtures("owner")
async def test_a_drain_keeps_two_claims_in_flight(app: Archivist, gated: GatedEmbedder) -> None:
    """While one claim's vectors are written the next claim is already being embedded: a drain (a
    directory ingest, a job's last step) keeps the model busy (one claim at a time left 26 % idle)."""
    source, _ = await app.sources.get_or_create("two-phase drain lanes")
    ids = []
    for i in range(BACKLOG_BATCH + 8):  # more than one claim's worth of chunks
        note = await app.documents.ingest(
            source.id, f"Lane note {i}", f"Pelican lane {i} fish.", "markdown", embed=False
        )
        ids.append(note.document.id)
    gated.released.clear()
    draining = asyncio.create_task(app.documents.backlog.drain(ids))
    try:
        await until(lambda: asyncio.sleep(0, gated.waiting >= 2), 10, "two claims embedding at once")
    finally:
        gated.released.set()
    assert await asyncio.wait_for(draining, 60) == len(ids)
    assert await app.documents.backlog.pending(ids) == 0


async def test_a_chunk_repeated_across_pages_is_embedded_once_per_batch(gated: GatedEmbedder, app: Archivist) -> None:
    footer = "Guide\n\nLicensed under the coffee commons; see the grinder guide for details."
    texts = [f"Guide\n\nBurr grinder {i} notes." for i in range(3)] + [footer] * 3
    before = gated.texts
    vectors = await app.documents.backlog._embed(texts)
    assert gated.texts - before == 4 and vectors.shape == (6, gated.dim)
    assert np.array_equal(vectors[3], vectors[5]) and not np.array_equal(vectors[0], vectors[1])


# ------------------------------------------------------------------ one call, one write


@pytest.mark.usefixtures("owner")
async def test_a_single_create_or_update_is_stored_with_its_vectors(app: Archivist, gated: GatedEmbedder) -> None:
    """A document created or updated by one tool call is embedded before its transaction: no reader
    ever sees it pending (searches keep the cheap fully-embedded path; the swarm's search p95 depends on
    it), and every chunk has its vector from the one write."""
    source, _ = await app.sources.get_or_create("one write")
    gated.released.clear()
    creating = asyncio.create_task(app.documents.ingest(source.id, "Heron", notes("heron", "estuary"), "markdown"))
    await asyncio.sleep(0.3)
    stored = await app.db.pool.fetchval("SELECT count(*) FROM documents WHERE title = 'Heron'")
    assert stored == 0 and not creating.done()  # nothing written while the embedder is held
    gated.released.set()
    created = await asyncio.wait_for(creating, 60)
    assert await app.documents.backlog.pending([created.document.id]) == 0
    gated.released.clear()
    updating = asyncio.create_task(app.documents.update(created.document.id, content=notes("heron", "marsh")))
    await asyncio.sleep(0.3)
    assert await app.documents.backlog.pending([created.document.id]) == 0 and not updating.done()
    gated.released.set()
    await asyncio.wait_for(updating, 60)
    rows = await app.db.pool.fetch(
        "SELECT embedding IS NOT NULL AS has_vector, embedded_at IS NOT NULL AS stamped, text FROM chunks "
        "WHERE document_id = $1",
        created.document.id,
    )
    assert rows and all(r["has_vector"] and r["stamped"] for r in rows) and any("marsh" in r["text"] for r in rows)


@pytest.mark.usefixtures("owner")
async def test_the_background_runner_waits_while_a_sync_stores_files(app: Archivist) -> None:
    """A sync's files are stored first: the model's threads would take the cores storing needs (the
    sync embeds its own chunks once every file is keyword-searchable)."""
    source, _ = await app.sources.get_or_create("stored before embedded")
    stored = await app.documents.ingest(source.id, "Kelp", notes("kelp", "otter"), "markdown", embed=False)
    backlog = app.documents.backlog
    pending = await backlog.pending([stored.document.id])
    assert pending > 0
    stop = asyncio.Event()
    with backlog.storing():
        runner = asyncio.create_task(backlog.run(stop))
        await asyncio.sleep(1.5)  # more than the runner's poll: it looked, and waited
        assert await backlog.pending([stored.document.id]) == pending
        assert await backlog.drain([stored.document.id]) == pending  # a sync's own drain is not held back
        await app.documents.ingest(source.id, "Reef", notes("reef", "eel"), "markdown", embed=False)
        await asyncio.sleep(0.5)
        assert await backlog.pending() > 0
    try:
        await until(lambda: _none_pending(app), 60, "the runner embeds once the storing ends")
    finally:
        stop.set()
        await asyncio.wait_for(runner, 30)


async def _none_pending(app: Archivist) -> bool:
    return await app.documents.backlog.pending() == 0
