"""The synthetic corpus of bench/scale.py: SciFact text and vectors copied with noise, loaded with COPY.

* chunk texts and their vectors come from the passage-vector file `bench/beir.py` saves after
  ingesting SciFact (`bench/.cache/vectors-<model>-c<size>o<overlap>.npz`); chunk i is passage
  i mod P, its vector perturbed with Gaussian noise (cosine ~0.9 to the original) and
  re-normalised, so copies are near neighbours but not duplicates, as in a real large corpus;
* rows are written with COPY into the schema the service creates (sql/ migrations, via
  `Archivist.open`), as a bulk load would: the HNSW index (and the GIN index, which the service
  keeps only with `keyword_ranking = "ts_rank"`) dropped and the BM25 triggers disabled during the
  load, over `--copy-streams` connections at once (PostgreSQL computes each row's tsvector in the
  backend receiving it: one stream keeps one core busy); then the BM25 postings are built over
  `--postings-parts` connections (services/search/bm25_index.py `rebuild_parallel`; 1: the
  one-statement `rebuild`), the indexes are rebuilt (with `--parallel-workers` maintenance workers
  besides the leader) and everything is ANALYZEd.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from services.app import Archivist
from services.documents import CHUNK_COLUMNS
from services.search import bm25_index

logger = logging.getLogger("bench.scale")

CHUNKS_PER_DOCUMENT = 5
COPY_BATCH = 20_000
NOISE_COSINE = 0.9
HNSW_INDEX = "chunks_embedding_hnsw_idx"
GIN_INDEX = "chunks_tsv_gin_idx"


def load_passages(path: Path) -> tuple[list[tuple[str, str]], np.ndarray]:
    """(title, text) pairs and unit vectors from a bench/beir.py passage-vector file."""
    with np.load(path, allow_pickle=False) as data:
        texts = data["texts"].tolist()
        vectors = np.asarray(data["vectors"], dtype=np.float32)
    pairs = []
    for embedded in texts:
        title, _, text = embedded.partition("\n\n")
        pairs.append((title, text or title))
    return pairs, vectors


def perturb(vectors: np.ndarray, rng: np.random.Generator, cosine: float = NOISE_COSINE) -> np.ndarray:
    """Unit vectors at roughly `cosine` similarity to the inputs (isotropic Gaussian noise)."""
    dim = vectors.shape[1]
    sigma = np.sqrt((1 / cosine**2 - 1) / dim)
    noisy = vectors + rng.normal(0.0, sigma, size=vectors.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


async def create_documents(
    app: Archivist, source_ids: list[uuid.UUID], count: int, pairs: Sequence, streams: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """`count` documents spread round-robin over the sources, COPYed over `streams` connections (every
    `streams`-th batch each); returns (document id, source id) pairs."""
    docs = [(uuid.uuid4(), source_ids[i % len(source_ids)]) for i in range(count)]
    records = [
        (doc_id, source_id, pairs[i % len(pairs)][0][:500], f"scale:{i}", "text", "", f"h{i}", CHUNKS_PER_DOCUMENT)
        for i, (doc_id, source_id) in enumerate(docs)
    ]

    async def copy(first: int) -> None:
        async with app.db.pool.acquire() as conn:
            for start in range(first * COPY_BATCH, len(records), streams * COPY_BATCH):
                await conn.copy_records_to_table(
                    "documents",
                    records=records[start : start + COPY_BATCH],
                    columns=[
                        "id",
                        "source_id",
                        "title",
                        "url",
                        "document_type",
                        "content",
                        "content_hash",
                        "chunk_count",
                    ],
                )

    async with asyncio.TaskGroup() as group:
        for first in range(streams):
            group.create_task(copy(first))
    return docs


def chunk_records(
    offset: int, n: int, docs: Sequence, pairs: Sequence, vectors: np.ndarray, rng: np.random.Generator
) -> list[tuple]:
    """Chunks offset .. offset + n - 1 as COPY records (CHUNK_COLUMNS)."""
    picks = (np.arange(offset, offset + n)) % len(pairs)
    noisy = perturb(vectors[picks], rng)
    records = []
    for j, p in enumerate(picks.tolist()):
        doc_id, source_id = docs[(offset + j) // CHUNKS_PER_DOCUMENT]
        text = pairs[p][1]
        page = (None, None, None, [])  # page_start, page_end, embedded_at, flags
        records.append(
            (doc_id, source_id, (offset + j) % CHUNKS_PER_DOCUMENT, text, 0, len(text), [], pairs[p][0], noisy[j])
            + page
        )
    return records


async def copy_chunks(
    pool: Any, size: int, docs: Sequence, pairs: Sequence, vectors: np.ndarray, rng: np.random.Generator, streams: int
) -> None:
    """COPY the chunks over `streams` connections at once: PostgreSQL computes each row's columns (the
    tsvector above all) in the backend that receives it, so one stream uses one core. The batches are
    built in order (the same noise as one stream draws), one ahead per stream, while the others copy."""
    started = time.perf_counter()
    batches: asyncio.Queue[list[tuple] | None] = asyncio.Queue(maxsize=streams)
    copied = 0

    async def produce() -> None:
        for offset in range(0, size, COPY_BATCH):
            await batches.put(chunk_records(offset, min(COPY_BATCH, size - offset), docs, pairs, vectors, rng))
        for _ in range(streams):
            await batches.put(None)

    async def consume() -> None:
        nonlocal copied
        async with pool.acquire() as conn:
            while (records := await batches.get()) is not None:
                await conn.copy_records_to_table("chunks", records=records, columns=CHUNK_COLUMNS)
                copied += len(records)
                logger.info("copied %d/%d chunks (%.0fs)", copied, size, time.perf_counter() - started)

    async with asyncio.TaskGroup() as group:
        group.create_task(produce())
        for _ in range(streams):
            group.create_task(consume())


async def load_chunks(
    app: Archivist, size: int, pairs: Sequence, vectors: np.ndarray, seed: int, args: Any
) -> dict[str, Any]:
    """COPY `size` chunks (indexes dropped, BM25 triggers off), then build the postings and indexes."""
    rng = np.random.default_rng(seed)
    sources = [
        await app.sources.create(f"scale-{size}-{i}", description="bench/scale.py synthetic corpus")
        for i in range(args.sources)
    ]
    started = time.perf_counter()
    docs = await create_documents(
        app, [src.id for src in sources], -(-size // CHUNKS_PER_DOCUMENT), pairs, args.copy_streams
    )
    async with app.db.pool.acquire() as conn:
        # a benchmark cluster of its own: fewer checkpoints during the bulk load
        await conn.execute("ALTER SYSTEM SET max_wal_size = '8GB'")
        await conn.execute("SELECT pg_reload_conf()")
        # the GIN only where the service keeps it (keyword_ranking=ts_rank, services/search/keyword_index.py)
        defs = {
            name: await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = $1", name)
            for name in (HNSW_INDEX, GIN_INDEX)
        }
        index_defs = {name: sql for name, sql in defs.items() if sql}
        for name in index_defs:
            await conn.execute(f"DROP INDEX IF EXISTS {name}")
        await bm25_index.set_triggers(conn, False)
        await copy_chunks(app.db.pool, size, docs, pairs, vectors, rng, args.copy_streams)
        copied = time.perf_counter()
        await conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
        await conn.execute(f"SET max_parallel_maintenance_workers = {int(args.parallel_workers)}")
        if args.postings_parts > 1:
            bm25 = await bm25_index.rebuild_parallel(app.db.pool, args.postings_parts)
        else:
            bm25 = await bm25_index.rebuild(conn)
        await bm25_index.set_triggers(conn, True)
        logger.info("BM25 postings built: %s", bm25)
        timings = {GIN_INDEX: 0.0}
        for name in index_defs:  # GIN last: only the ts_rank keyword leg uses it
            build = time.perf_counter()
            await conn.execute(index_defs[name])
            timings[name] = round(time.perf_counter() - build, 1)
            logger.info("%s built in %.0fs", name, timings[name])
        await conn.execute("ANALYZE chunks")
        await conn.execute("ANALYZE documents")
    return {
        "copy_seconds": round(copied - started, 1),
        "bm25_postings": bm25,
        "bm25_postings_seconds": round(bm25["postings_seconds"] + bm25["vacuum_seconds"], 1),
        "gin_build_seconds": timings[GIN_INDEX],
        "hnsw_build_seconds": timings[HNSW_INDEX],
        "total_seconds": round(time.perf_counter() - started, 1),
        "sources": args.sources,
        "maintenance_work_mem": args.maintenance_work_mem,
        "parallel_maintenance_workers": args.parallel_workers,
        "copy_streams": args.copy_streams,
        "postings_parts": args.postings_parts,
    }
