"""Ingesting a BEIR corpus for bench/beir.py: chunk texts embedded ahead in large batches by a caching
embedder, documents stored through `DocumentService.ingest`, the source reused when unchanged."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.beir_data import URL_PREFIX, BeirDoc, file_digest  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.chunking import get_chunker  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.documents import embedding_text  # noqa: E402
from services.embeddings.base import Embedder  # noqa: E402
from services.embeddings.gate import DOCUMENT_SLICE  # noqa: E402
from services.embeddings.models import cpu_threads  # noqa: E402

logger = logging.getLogger("bench.beir")

DOCUMENT_TYPE = "text"
INGEST_BATCH_DOCS = 256
INGEST_CONCURRENCY = 4

# --- ingestion -------------------------------------------------------------------------------------------


class CachingEmbedder(Embedder):
    """Wraps the real embedder: passages embedded ahead of time are served from a cache, and every
    call into the model is timed so ingestion can report its share of time outside the model."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.cache: dict[str, np.ndarray] = {}
        self.model_seconds = 0.0
        self.texts_embedded = 0

    def timed_embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of `texts`, embedded as the model gate does: longest first, `DOCUMENT_SLICE` texts a
        call, one call per core side by side (one thread of calls left a core idle)."""
        start = time.perf_counter()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        slices = [order[i : i + DOCUMENT_SLICE] for i in range(0, len(order), DOCUMENT_SLICE)]
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        with ThreadPoolExecutor(cpu_threads()) as lanes:
            embedded = lanes.map(lambda picked: self.inner.embed_documents([texts[i] for i in picked]), slices)
            for picked, rows in zip(slices, embedded, strict=True):
                vectors[picked] = rows
        self.model_seconds += time.perf_counter() - start
        self.texts_embedded += len(texts)
        return vectors

    def prefetch(self, texts: list[str]) -> None:
        """Embed texts not yet cached in one call and keep their vectors."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, vector in zip(missing, self.timed_embed(missing), strict=True):
                self.cache[text] = vector

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.prefetch(list(texts))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def load(self, path: Path) -> int:
        """Pre-fill the cache from a file written by `save` (vectors of an earlier run, same model)."""
        if not path.is_file():
            return 0
        with np.load(path, allow_pickle=False) as data:
            for text, vector in zip(data["texts"].tolist(), data["vectors"], strict=True):
                self.cache[text] = vector
        logger.info("loaded %d cached passage vectors from %s", len(self.cache), path)
        return len(self.cache)

    def save(self, path: Path) -> None:
        if not self.cache:
            return
        texts = list(self.cache)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, texts=np.array(texts), vectors=np.stack([self.cache[t] for t in texts]))


@dataclass
class IngestReport:
    documents: int = 0
    chunks: int = 0
    reused: bool = False
    wall_seconds: float = 0.0
    model_seconds: float = 0.0
    #: time inside DocumentService.ingest (chunking, database writes, index updates), overlapped with embedding
    service_seconds: float = 0.0
    texts_embedded: int = 0
    vectors_from_disk: int = 0
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def outside_model_share(self) -> float:
        if not self.wall_seconds:
            return 0.0
        return max(0.0, self.wall_seconds - self.model_seconds) / self.wall_seconds

    @property
    def serial_outside_share(self) -> float:
        """Share outside the model if ingestion and embedding did not overlap."""
        total = self.model_seconds + self.service_seconds
        return self.service_seconds / total if total else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "reused": self.reused,
            "wall_seconds": round(self.wall_seconds, 2),
            "model_seconds": round(self.model_seconds, 2),
            "service_seconds": round(self.service_seconds, 2),
            "serial_outside_model_share": round(self.serial_outside_share, 4),
            "texts_embedded": self.texts_embedded,
            "vectors_from_disk": self.vectors_from_disk,
            "docs_per_second": round(self.docs_per_second, 2),
            "outside_model_share": round(self.outside_model_share, 4),
            "statuses": self.statuses,
        }


def source_title(corpus_path: Path, digest: str, settings: Settings) -> str:
    return f"beir:{corpus_path.parent.name}:{digest[:12]}:c{settings.chunk_size}o{settings.chunk_overlap}"


def chunk_texts(settings: Settings, doc: BeirDoc) -> list[str]:
    """What the embedding backlog (services/documents/backlog.py) embeds for this document (a text that
    differs is simply embedded again by `ingest`, inside the timed model calls, so a mismatch costs speed,
    not honesty)."""
    chunker = get_chunker(settings, document_type=DOCUMENT_TYPE)
    return [embedding_text(doc.title or doc.doc_id, c.heading_path, c.text) for c in chunker.chunk(doc.text)]


async def ingest_batch(app: Archivist, source_id: Any, docs: Sequence[BeirDoc], report: IngestReport) -> None:
    """Ingest documents through the service layer, a few at a time."""
    gate = asyncio.Semaphore(INGEST_CONCURRENCY)

    async def one(doc: BeirDoc) -> None:
        async with gate:
            result = await app.documents.ingest(
                source_id, doc.title or doc.doc_id, doc.text, DOCUMENT_TYPE, URL_PREFIX + doc.doc_id
            )
        report.statuses[result.status] = report.statuses.get(result.status, 0) + 1
        report.chunks += result.chunks_created

    await asyncio.gather(*(one(d) for d in docs))


async def ingest_corpus(app: Archivist, embedder: CachingEmbedder, source_id: Any, docs: list[BeirDoc]) -> IngestReport:
    """Pipelined: embed batch i+1 in a thread while batch i is written to the database."""
    report = IngestReport(documents=len(docs))
    batches = [docs[i : i + INGEST_BATCH_DOCS] for i in range(0, len(docs), INGEST_BATCH_DOCS)]
    start = time.perf_counter()

    def embed_batch(batch: Sequence[BeirDoc]) -> None:
        embedder.prefetch([t for d in batch for t in chunk_texts(app.settings, d)])

    pending = asyncio.create_task(asyncio.to_thread(embed_batch, batches[0])) if batches else None
    for index, batch in enumerate(batches):
        assert pending is not None
        await pending
        if index + 1 < len(batches):
            pending = asyncio.create_task(asyncio.to_thread(embed_batch, batches[index + 1]))
        db_start = time.perf_counter()
        await ingest_batch(app, source_id, batch, report)
        report.service_seconds += time.perf_counter() - db_start
        done = min((index + 1) * INGEST_BATCH_DOCS, len(docs))
        elapsed = time.perf_counter() - start
        logger.info("ingested %d/%d docs in %.0fs (model %.0fs)", done, len(docs), elapsed, embedder.model_seconds)
    report.wall_seconds = time.perf_counter() - start
    report.model_seconds = embedder.model_seconds
    report.texts_embedded = embedder.texts_embedded
    return report


async def prepare_source(
    app: Archivist, embedder: CachingEmbedder, corpus_path: Path, docs: list[BeirDoc], settings: Settings
) -> tuple[Any, IngestReport]:
    """The bench source for this corpus, ingesting it unless an identical complete copy exists."""
    title = source_title(corpus_path, file_digest(corpus_path), settings)
    source = await app.sources.find_by_title(title)
    if source is not None:
        stats = await app.sources.stats(source.id)
        if stats.documents_count == len(docs):
            logger.info("reusing source %s (%d documents, %d chunks)", title, stats.documents_count, stats.chunks_count)
            return source.id, IngestReport(documents=len(docs), chunks=stats.chunks_count, reused=True)
        logger.info("source %s is incomplete (%d docs): resuming", title, stats.documents_count)
    else:
        source = await app.sources.create(title, description="BEIR benchmark corpus (bench/beir.py)")
    report = await ingest_corpus(app, embedder, source.id, docs)
    return source.id, report


# --- evaluation ------------------------------------------------------------------------------------------
