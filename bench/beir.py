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
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.beir_data import (  # noqa: E402
    SPLITS,
    URL_PREFIX,
    file_digest,
    query_half,
    read_corpus,
    read_qrels,
    read_queries,
    split_queries,
)
from bench.beir_ingest import CachingEmbedder, prepare_source  # noqa: E402
from bench.common import CACHE_DIR, machine_info, settings_summary, slug  # noqa: E402
from bench.metrics import evaluate, percentile  # noqa: E402
from services.access.scope import Scope, use_scope  # noqa: E402
from services.app import Archivist  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.embeddings import create_embedder  # noqa: E402
from services.embeddings.base import Embedder  # noqa: E402
from services.reranking import create_reranker  # noqa: E402
from services.reranking.base import Reranker  # noqa: E402
from services.search.base import SearchRequest, SearchStrategy  # noqa: E402
from services.search.hybrid import HybridSearch  # noqa: E402
from services.search.rerank import RerankSearch  # noqa: E402
from services.search.vector import VectorSearch  # noqa: E402

logger = logging.getLogger("bench.beir")

EVAL_LIMIT = 100
#: Settings that change what is stored: a variant may not override them.
INDEX_SETTINGS = frozenset({"embedding_provider", "embedding_model", "chunk_size", "chunk_overlap", "fts_config"})


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """`key=value` strings -> dict (values are validated by Settings)."""
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set expects key=value, got {pair!r}")
        overrides[key.strip()] = value.strip()
    return overrides


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


def format_table(results: dict[str, dict[str, Any]]) -> str:
    header = f"{'strategy':<28} {'nDCG@10':>8} {'R@100':>7} {'MRR@10':>7} {'p50 ms':>8} {'p95 ms':>8}"
    lines = [header, "-" * len(header)]
    for name, r in results.items():
        lines.append(
            f"{name:<28} {r['ndcg@10']:>8.4f} {r['recall@100']:>7.4f} {r['mrr@10']:>7.4f} "
            f"{r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f}"
        )
    return "\n".join(lines)


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
    with use_scope(Scope.owner()):  # a benchmark runs as the local owner
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
