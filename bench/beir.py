"""BEIR retrieval benchmark for Archivist's search strategies (not part of the test suite).

    .venv/bin/python bench/beir.py --corpus ../shared/data/scifact/corpus.jsonl \\
        --queries ../shared/data/scifact/queries.jsonl --qrels ../shared/data/scifact/qrels/train.tsv \\
        --out bench/results.json [--strategies vector,hybrid,rerank] [--set embedding_model=...]

What it does:

1. Opens Archivist with the server's settings (ARCHIVIST_* / `.env`, then `--set key=value`
   overrides) on a dedicated embedded PostgreSQL under ``bench/.cache/<index-slug>`` (one per
   embedding model, keyword config and chunking, so the model-mismatch guard never trips).
2. Ingests the corpus (title + text per line) into one source through `DocumentService.ingest`.
   Chunk texts are embedded ahead of time in large batches (many documents per embed call) by a
   caching embedder handed to Archivist, so `ingest` finds its vectors ready; the embedding of
   batch i+1 overlaps the database writes of batch i. The report gives docs/s and the share of
   wall time spent outside the embedding model. A source with the same corpus hash, model and
   chunking is reused, so re-running only evaluates.
3. Runs every judged query through each strategy object directly (limit 100, bypassing the
   20-result cap of the tools) and reports nDCG@10, recall@100, MRR@10 at document level (a
   document ranks where its best chunk ranks), plus server-side latency p50/p95 = query
   embedding + strategy search, measured one query at a time.
4. `--variants FILE` (JSON list of {"name": ..., "settings": {...}}) re-runs the strategies with
   query-time settings changed (RRF k/weights/depth, rerank depth/length/fusion) on the same index.
5. `--split tune|heldout|both|all`: SciFact ships only its train qrels here, so the judged queries
   are split deterministically in two halves by a hash of the query id (`query_half`): tune on
   `tune`, confirm on `heldout`; `both` runs every query once and reports each half separately.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import hashlib
import json
import logging
import os
import platform
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.metrics import evaluate, percentile  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.chunking import get_chunker  # noqa: E402
from services.documents import embedding_text  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.embeddings.base import Embedder  # noqa: E402
from services.reranking import create_reranker  # noqa: E402
from services.reranking.base import Reranker  # noqa: E402
from services.search.base import SearchRequest, SearchStrategy  # noqa: E402
from services.search.hybrid import HybridSearch  # noqa: E402
from services.search.rerank import RerankSearch  # noqa: E402
from services.search.vector import VectorSearch  # noqa: E402
from services.settings import Settings  # noqa: E402

logger = logging.getLogger("bench.beir")

CACHE_DIR = ROOT / "bench" / ".cache"
URL_PREFIX = "beir:"
DOCUMENT_TYPE = "text"
EVAL_LIMIT = 100
INGEST_BATCH_DOCS = 256
INGEST_CONCURRENCY = 4
#: Settings that change what is stored: a variant may not override them.
INDEX_SETTINGS = frozenset({"embedding_provider", "embedding_model", "chunk_size", "chunk_overlap", "fts_config"})


# --- data ------------------------------------------------------------------------------------------------


@dataclass
class BeirDoc:
    doc_id: str
    title: str
    text: str


def read_corpus(path: Path) -> list[BeirDoc]:
    """BEIR corpus.jsonl: one {"_id", "title", "text"} object per line."""
    docs = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                obj = json.loads(line)
                docs.append(BeirDoc(str(obj["_id"]), (obj.get("title") or "").strip(), obj.get("text") or ""))
    return docs


def read_queries(path: Path) -> dict[str, str]:
    """BEIR queries.jsonl: {"_id", "text"} per line."""
    queries = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                obj = json.loads(line)
                queries[str(obj["_id"])] = obj["text"]
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV with a header: query-id, corpus-id, score."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader, None)
        for row in reader:
            if len(row) >= 3:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


SPLITS = ("all", "tune", "heldout", "both")


def query_half(query_id: str) -> str:
    """The half a judged query is in, "tune" or "heldout": fixed by the SHA-256 of its id (about half each)."""
    return "tune" if hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0 else "heldout"


def split_queries(queries: dict[str, str], split: str) -> dict[str, str]:
    """The queries of one half ("tune" / "heldout"), or all of them ("all" / "both")."""
    if split in ("all", "both"):
        return dict(queries)
    return {q: t for q, t in queries.items() if query_half(q) == split}


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- settings and cache location -----------------------------------------------------------------------


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """`key=value` strings -> dict (values are validated by Settings)."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set expects key=value, got {pair!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def index_slug(settings: Settings) -> str:
    """One bench database per stored-index configuration."""
    return slug(
        f"{settings.embedding_provider}-{settings.embedding_model}-{settings.fts_config}"
        f"-c{settings.chunk_size}-o{settings.chunk_overlap}"
    )


def bench_settings(overrides: dict[str, Any], cache_dir: Path) -> Settings:
    """Server settings + overrides, on a dedicated embedded database under the bench cache."""
    base = Settings(**overrides)
    return base.model_copy(update={"database_url": None, "data_dir": cache_dir / index_slug(base)})


def with_query_settings(settings: Settings, changes: dict[str, Any]) -> Settings:
    """A copy with query-time settings changed (validated through the Settings model)."""
    bad = INDEX_SETTINGS.intersection(changes)
    if bad:
        raise SystemExit(f"variant changes index settings {sorted(bad)}: run a separate benchmark instead")
    merged = {**settings.model_dump(), **changes}
    return Settings.model_validate(merged)


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
        start = time.perf_counter()
        vectors = self.inner.embed_documents(texts)
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
    """What `DocumentService.prepare_chunks` embeds for this document (a text that differs is simply
    embedded again by `ingest`, inside the timed model calls, so a mismatch costs speed, not honesty)."""
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


@dataclass
class QueryVectors:
    vectors: dict[str, np.ndarray]
    embed_ms: dict[str, float]


def embed_queries(embedder: Embedder, queries: dict[str, str], cache_file: Path | None = None) -> QueryVectors:
    """Embed each query once, timing each call (part of server-side latency). With `cache_file`,
    vectors and timings of an earlier run with the same model are reused when present and saved
    otherwise (query-time sweeps then do not re-embed; their latency reuses the recorded timings)."""
    cached = load_query_vectors(cache_file) if cache_file else QueryVectors({}, {})
    if all(q in cached.vectors for q in queries):
        return QueryVectors({q: cached.vectors[q] for q in queries}, {q: cached.embed_ms[q] for q in queries})
    vectors, times = {}, {}
    embedder.embed_query("warm-up")
    for qid, text in queries.items():
        start = time.perf_counter()
        vectors[qid] = embedder.embed_query(text.strip())
        times[qid] = (time.perf_counter() - start) * 1000
    if cache_file:
        ids = list(vectors)
        np.savez(
            cache_file,
            ids=np.array(ids),
            vectors=np.stack([vectors[q] for q in ids]),
            ms=np.array([times[q] for q in ids]),
        )
    return QueryVectors(vectors, times)


def load_query_vectors(path: Path) -> QueryVectors:
    if not path.is_file():
        return QueryVectors({}, {})
    with np.load(path, allow_pickle=False) as data:
        ids = data["ids"].tolist()
        return QueryVectors(
            dict(zip(ids, data["vectors"], strict=True)), dict(zip(ids, data["ms"].tolist(), strict=True))
        )


def doc_ranking(hits: Sequence[Any]) -> list[str]:
    """Corpus ids, best first, from chunk hits (document ranks at its best chunk)."""
    ids = [h.url[len(URL_PREFIX) :] for h in hits if h.url and h.url.startswith(URL_PREFIX)]
    return list(dict.fromkeys(ids))


def summarize(
    run: dict[str, list[str]], qrels: dict, total_ms: dict[str, float], search_ms: dict[str, float]
) -> dict[str, Any]:
    """Metrics and latency percentiles over the queries of `run`."""
    scores = evaluate(run, qrels)
    total, search = [total_ms[q] for q in run], [search_ms[q] for q in run]
    return {
        **{k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()},
        "p50_ms": round(percentile(total, 50), 1),
        "p95_ms": round(percentile(total, 95), 1),
        "search_only_p50_ms": round(percentile(search, 50), 1),
        "search_only_p95_ms": round(percentile(search, 95), 1),
    }


async def run_strategy(
    strategy: SearchStrategy,
    queries: dict[str, str],
    qv: QueryVectors,
    source_id: Any,
    qrels: dict,
    split: str = "all",
) -> dict[str, dict[str, Any]]:
    """Every query through one strategy: metrics and latency (embedding + search, ms), keyed by
    the split reported ("all", "tune", "heldout"; `split="both"` gives the two halves)."""
    run: dict[str, list[str]] = {}
    search_ms: dict[str, float] = {}
    total_ms: dict[str, float] = {}
    first = next(iter(queries))
    sources = source_id and [source_id]
    pairs_before = rerank_counters(strategy)
    await strategy.search(SearchRequest(queries[first].strip(), qv.vectors[first], EVAL_LIMIT, sources))
    for qid, text in queries.items():
        start = time.perf_counter()
        hits = await strategy.search(SearchRequest(text.strip(), qv.vectors[qid], EVAL_LIMIT, sources))
        elapsed = (time.perf_counter() - start) * 1000
        search_ms[qid] = elapsed
        total_ms[qid] = elapsed + qv.embed_ms[qid]
        run[qid] = doc_ranking(hits)
    cache_share = rerank_cache_share(strategy, pairs_before)
    halves = ("tune", "heldout") if split == "both" else (split,)
    out = {}
    for half in halves:
        part = {q: r for q, r in run.items() if half == "all" or query_half(q) == half}
        out[half] = {"rerank_cached_pairs": cache_share, **summarize(part, qrels, total_ms, search_ms)}
    return out


class CachingReranker(Reranker):
    """Remembers cross-encoder logits per (query, passage) so variants that only change the fusion
    or depth do not pay for the model again. Latency of a run served from this cache is not a
    latency figure: `run_strategy` reports the share of cached pairs."""

    def __init__(self, inner: Reranker) -> None:
        self.inner = inner
        self.name = inner.name
        self.cache: dict[tuple[str, str], float] = {}
        self.pairs = 0
        self.cached_pairs = 0

    def score(self, query: str, passages: list[str]) -> list[float]:
        missing = [p for p in dict.fromkeys(passages) if (query, p) not in self.cache]
        if missing:
            for passage, logit in zip(missing, self.inner.score(query, missing), strict=True):
                self.cache[(query, passage)] = logit
        self.pairs += len(passages)
        self.cached_pairs += len(passages) - len(missing)
        return [self.cache[(query, p)] for p in passages]


def rerank_counters(strategy: SearchStrategy) -> tuple[int, int]:
    """(pairs scored, pairs served from cache) so far by a rerank strategy's CachingReranker."""
    reranker = getattr(strategy, "reranker", None)
    if isinstance(reranker, CachingReranker):
        return reranker.pairs, reranker.cached_pairs
    return 0, 0


def rerank_cache_share(strategy: SearchStrategy, before: tuple[int, int]) -> float | None:
    """Share of cross-encoder pairs of this run served from cache (None for other strategies)."""
    pairs, cached = rerank_counters(strategy)
    if pairs == before[0]:
        return None
    return round((cached - before[1]) / (pairs - before[0]), 3)


class StrategyFactory:
    """Builds strategies for a settings variant, sharing rerankers by (model, max_length)."""

    def __init__(self, app: Archivist) -> None:
        self.app = app
        self._rerankers: dict[tuple[str, str, int], Reranker] = {}

    def reranker(self, settings: Settings) -> Reranker:
        key = (settings.reranker_provider, settings.reranker_model, settings.rerank_max_length)
        if key not in self._rerankers:
            self._rerankers[key] = CachingReranker(create_reranker(settings))
        return self._rerankers[key]

    def build(self, name: str, settings: Settings) -> SearchStrategy:
        if name == "vector":
            return VectorSearch(self.app.db)
        hybrid = HybridSearch(self.app.db, settings)
        if name == "hybrid":
            return hybrid
        if name == "rerank":
            return RerankSearch(hybrid, self.reranker(settings), settings)
        raise SystemExit(f"unknown strategy {name!r}")


# --- reporting -------------------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def format_table(results: dict[str, dict[str, Any]]) -> str:
    header = f"{'strategy':<28} {'nDCG@10':>8} {'R@100':>7} {'MRR@10':>7} {'p50 ms':>8} {'p95 ms':>8}"
    lines = [header, "-" * len(header)]
    for name, r in results.items():
        lines.append(
            f"{name:<28} {r['ndcg@10']:>8.4f} {r['recall@100']:>7.4f} {r['mrr@10']:>7.4f} "
            f"{r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f}"
        )
    return "\n".join(lines)


def settings_summary(settings: Settings) -> dict[str, Any]:
    keys = [
        "embedding_provider",
        "embedding_model",
        "chunk_size",
        "chunk_overlap",
        "fts_config",
        "hnsw_ef_search",
        "hybrid_candidates",
        "rrf_k",
        "hybrid_vector_weight",
        "hybrid_keyword_weight",
        "reranker_model",
        "rerank_candidates",
        "rerank_max_length",
        "rerank_fusion",
        "rerank_weight",
        "rerank_rrf_k",
        "keyword_ranking",
        "hybrid_fusion",
        "bm25_postings_per_term",
        "bm25_candidates",
    ]
    return {k: getattr(settings, k) for k in keys if hasattr(settings, k)}


# --- main ------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--qrels", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--strategies", default="vector,hybrid,rerank")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="settings override key=value")
    parser.add_argument("--variants", type=Path, help="JSON list of {name, settings} query-time variants")
    parser.add_argument("--max-queries", type=int, default=0, help="evaluate only the first N judged queries")
    parser.add_argument(
        "--split",
        choices=SPLITS,
        default="all",
        help="judged queries to run: a fixed half by query-id hash (tune / heldout), both halves reported "
        "separately (both), or every query (all)",
    )
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    parser.add_argument(
        "--reuse-vectors",
        action="store_true",
        help="serve passage and query vectors saved by an earlier run with the same model and chunking "
        "(for a new keyword config, or query-time sweeps); ingestion then times database work only and "
        "query-embedding latency is the one recorded when the vectors were made",
    )
    return parser.parse_args(argv)


def load_variants(path: Path | None, strategies: list[str]) -> list[dict[str, Any]]:
    if path is None:
        return [{"name": "defaults", "settings": {}, "strategies": strategies}]
    variants = json.loads(path.read_text())
    for v in variants:
        v.setdefault("settings", {})
        v.setdefault("strategies", strategies)
    return variants


async def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    settings = bench_settings(parse_overrides(args.overrides), args.cache_dir)
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    docs = read_corpus(args.corpus)
    qrels = read_qrels(args.qrels)
    queries = split_queries({q: t for q, t in read_queries(args.queries).items() if q in qrels}, args.split)
    if args.max_queries:
        queries = dict(list(queries.items())[: args.max_queries])
    logger.info("%d documents, %d judged queries; index %s", len(docs), len(queries), settings.data_dir)

    embedder = CachingEmbedder(await asyncio.to_thread(create_embedder, settings))
    vectors_file = args.cache_dir / f"vectors-{slug(embedder.name)}-c{settings.chunk_size}o{settings.chunk_overlap}.npz"
    from_disk = embedder.load(vectors_file) if args.reuse_vectors else 0
    app = await Archivist.open(settings, embedder)
    try:
        source_id, ingest = await prepare_source(app, embedder, args.corpus, docs, settings)
        ingest.vectors_from_disk = from_disk
        if not ingest.reused:
            embedder.save(vectors_file)
        query_file = args.cache_dir / f"queries-{slug(embedder.name)}-{file_digest(args.queries)[:12]}.npz"
        qv = embed_queries(embedder.inner, queries, query_file if args.reuse_vectors else None)
        factory = StrategyFactory(app)
        results: dict[str, dict[str, Any]] = {}
        variant_settings: dict[str, dict[str, Any]] = {}
        for variant in load_variants(args.variants, strategies):
            vs = with_query_settings(settings, variant["settings"])
            variant_settings[variant["name"]] = variant["settings"]
            for name in variant["strategies"]:
                label = name if variant["name"] == "defaults" else f"{variant['name']}/{name}"
                by_half = await run_strategy(factory.build(name, vs), queries, qv, source_id, qrels, args.split)
                for half, scores in by_half.items():
                    key = label if args.split != "both" else f"{label} [{half}]"
                    results[key] = scores
                    logger.info("%s: %s", key, scores)
    finally:
        await app.close()

    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "corpus": str(args.corpus),
        "qrels": str(args.qrels),
        "queries": len(queries),
        "split": args.split,
        "settings": settings_summary(settings),
        "query_embed_p50_ms": round(percentile(list(qv.embed_ms.values()), 50), 1),
        "ingestion": ingest.as_dict(),
        "variants": variant_settings,
        "results": results,
    }


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = parse_args(argv)
    report = asyncio.run(benchmark(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    ing = report["ingestion"]
    print(f"\n{report['date']}  {report['machine']['cpu']} ({report['machine']['cores']} cores)")
    print(f"settings: {json.dumps(report['settings'], default=str)}")
    if ing["reused"]:
        print(f"ingestion: reused existing source ({ing['documents']} docs, {ing['chunks']} chunks)")
    else:
        print(
            f"ingestion: {ing['documents']} docs, {ing['chunks']} chunks in {ing['wall_seconds']}s = "
            f"{ing['docs_per_second']} docs/s; model {ing['model_seconds']}s; "
            f"outside the model {ing['outside_model_share'] * 100:.1f}% of wall time "
            f"({ing['serial_outside_model_share'] * 100:.1f}% if not overlapped: service {ing['service_seconds']}s)"
        )
    print(
        f"query embedding p50 {report['query_embed_p50_ms']} ms; {report['queries']} queries, split {report['split']}\n"
    )
    print(format_table(report["results"]))


if __name__ == "__main__":
    main()
