"""Compact postings (sql/042): the keyword leg's top 10 equals BM25 computed here from the chunks.

The oracle reads nothing the postings store: each chunk's terms, tf and dl come from
archivist_chunk_terms(tsv, context || ' ' || text) (what the postings must hold), df and N from those.
With few postings per term (pruning) it replays the leg's algorithm (each term's best postings by
impact, ties by seq; candidates by sum(idf * impact), ties by seq; exact BM25 for them); with every
posting read it is plain exhaustive BM25. Blocks of 4 postings make every term span several blocks.
"""

from __future__ import annotations

import asyncio
import math
import random
import struct
from decimal import Decimal
from typing import Any

import pytest

from services.app import Archivist
from services.search import bm25_index, pending
from services.search.base import SearchRequest
from services.search.bm25 import idf
from services.search.hybrid import HybridSearch
from services.search.keyword import KeywordSearch
from services.search.merge import PostingsMerger

BLOCK = 4
WORDS = "alpha beta gamma delta kiln glaze sourdough ferment tensor gradient socket thread".split()
NAMES = ["mock.patch.object", "patch.object", "dirs_exist_ok", "tokio::spawn", "os.path.join"]
QUERIES = [
    "alpha",
    "alpha beta",
    "kiln glaze sourdough",
    "mock.patch.object",
    "patch.object alpha",
    "tensor gradient socket thread",
    "dirs_exist_ok beta",
    "gamma delta ferment",
]
PRUNED = {"bm25_postings_per_term": 6, "bm25_candidates": 10, "hybrid_candidates": 10}
FULL = {"bm25_postings_per_term": 100000, "bm25_candidates": 100000, "hybrid_candidates": 10}
TERMS_SQL = (
    "SELECT c.id, c.source_id, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf, "
    "tsvector_length(t.terms) AS dl "
    "FROM chunks c, LATERAL (SELECT archivist_chunk_terms(c.tsv, c.context || ' ' || c.text) AS terms) t, "
    "unnest(t.terms) u"
)


def _text(rng: random.Random, code: bool) -> str:
    """A chunk of Zipf-ish words (`alpha` most common), some names, of varied length."""
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    words = rng.choices(WORDS, weights, k=rng.randint(3, 40))
    if code or rng.random() < 0.3:
        words += rng.choices(NAMES, k=rng.randint(1, 3))
    return " ".join(words) + "."


async def _corpus(app: Archivist) -> list:
    rng = random.Random(37)
    sources = []
    for s in range(3):
        source = await app.sources.create(f"compact {s}")
        sources.append(source)
        for i in range(40):
            code = s == 2
            await app.documents.ingest(
                source.id, f"c{s}-{i}", _text(rng, code), "code" if code else "markdown", f"c{s}:{i}", embed=False
            )
    return sources


def _impact(tf: int, dl: int, avgdl: float) -> float:
    """sql/012 bm25_impact as PostgreSQL computes it (numeric literals, float8, then real)."""
    x = float(Decimal("0.75") * dl) / avgdl
    value = float(Decimal(tf) * Decimal("2.2")) / (tf + 1.2 * (0.25 + x))
    return struct.unpack("f", struct.pack("f", value))[0]


class Oracle:
    """BM25 from the chunks: postings[term] = [(chunk, source, tf, dl)], plus each chunk's seq."""

    def __init__(self, rows: list, seqs: dict, impacts: dict | None = None) -> None:
        self.postings: dict[str, list[tuple]] = {}
        dls: dict = {}
        for r in rows:
            self.postings.setdefault(r["lexeme"], []).append((r["id"], r["source_id"], r["tf"], r["dl"]))
            dls[r["id"]] = r["dl"]
        self.n = len(dls)
        self.avgdl = max(sum(dls.values()) / self.n, 1.0)
        self.seqs = seqs
        # after a rebuild every impact comes from one avgdl; after writes, from the stored postings
        self.impacts = impacts or {
            (t, c): _impact(tf, dl, self.avgdl) for t, ps in self.postings.items() for c, _, tf, dl in ps
        }

    def ranking(self, terms: list[str], sources: set | None, per_term: int, candidates: int) -> list[tuple]:
        idfs = {t: idf(self.n, len(self.postings[t])) for t in terms if t in self.postings}
        scope = {t: [p for p in self.postings[t] if sources is None or p[1] in sources] for t in idfs}
        pool: dict = {}
        for t, ps in scope.items():
            best = sorted(ps, key=lambda p: (-self.impacts[(t, p[0])], self.seqs[p[0]]))[:per_term]
            for p in best:
                pool[p[0]] = pool.get(p[0], 0.0) + idfs[t] * self.impacts[(t, p[0])]
        chosen = sorted(pool, key=lambda c: (-pool[c], self.seqs[c]))[:candidates]
        scores = dict.fromkeys(chosen, 0.0)
        for t, ps in scope.items():
            for c, _, tf, dl in ps:
                if c in scores:
                    scores[c] += idfs[t] * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / self.avgdl))
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:10]


async def _oracle(app: Archivist, stored_impacts: bool = False) -> Oracle:
    rows = await app.db.pool.fetch(TERMS_SQL)
    seqs = {r["chunk_id"]: r["seq"] for r in await app.db.pool.fetch("SELECT chunk_id, seq FROM chunk_seqs")}
    impacts = None
    if stored_impacts:
        impacts = {
            (r["term"], r["chunk_id"]): r["impact"] for r in await app.db.pool.fetch("SELECT * FROM chunk_postings")
        }
    return Oracle(rows, seqs, impacts)


async def _leg(app: Archivist, query: str, sources: list | None, **overrides: Any) -> list[tuple]:
    settings = app.settings.model_copy(update={"keyword_max_term_frequency": 1.0, **overrides})
    search = KeywordSearch(HybridSearch(app.db, settings))
    rows = await search.rows(SearchRequest(query, _zero(app), 10, sources, keyword_mode=overrides.get("mode", "any")))
    return [(r["chunk_id"], float(r["kscore"])) for r in rows]


def _zero(app: Archivist) -> Any:
    import numpy as np

    assert app.db.config is not None
    return np.full(app.db.config.embedding_dim, 0.1, dtype=np.float32)


async def _query_lexemes(app: Archivist, query: str) -> list[str]:
    return list(
        await app.db.pool.fetchval(
            f"SELECT tsvector_to_array(archivist_tsvector('{app.db.fts_config}'::regconfig, $1))", query
        )
    )


async def _assert_rankings(app: Archivist, oracle: Oracle, sources: list | None = None) -> int:
    """Every query, pruned and full, equals the oracle; returns how many (query, term) reads pruned."""
    pruned = 0
    scope = set(sources) if sources else None
    for query in QUERIES:
        terms = await _query_lexemes(app, query)
        for settings in (PRUNED, FULL):
            cand = max(settings["bm25_candidates"], settings["hybrid_candidates"], 10)
            want = oracle.ranking(terms, scope, settings["bm25_postings_per_term"], cand)
            got = await _leg(app, query, sources, **settings)
            _assert_same(got, want, (query, settings))
        for t in terms:
            in_scope = [p for p in oracle.postings.get(t, []) if scope is None or p[1] in scope]
            pruned += len(in_scope) > PRUNED["bm25_postings_per_term"]
    return pruned


def _assert_same(got: list[tuple], want: list[tuple], context: object) -> None:
    """Same scores in the same order, and the same chunks up to ties (equal scores summed in another
    order differ in the last bits, which is all that orders them)."""
    assert len(got) == len(want), context
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert math.isclose(a, b, rel_tol=1e-9), (context, got, want)
    ties = {round(score, 9) for _, score in want}
    for score in ties:
        mine = {c for c, s in got if round(s, 9) == score}
        theirs = {c for c, s in want if round(s, 9) == score}
        if got[-1][1] > score + 1e-9 or len(got) < 10:  # a tie group cut at the end may differ
            assert mine == theirs, (context, got, want)
    # ids in order, but for the tie group at the cut (its other members may rank just outside the ten)
    before_cut = [c for c, s in want if len(want) < 10 or s > want[-1][1] + 1e-9]
    assert [c for c, _ in got][: len(before_cut)] == before_cut or len(ties) < len(want), (context, got, want)


async def _rebuild(app: Archivist) -> None:
    async with app.db.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT bm25_rebuild($1)", BLOCK)


async def _merge(app: Archivist) -> None:
    async with app.db.pool.acquire() as conn, conn.transaction():
        assert await conn.fetchval("SELECT bm25_merge($1)", BLOCK) >= 0


@pytest.mark.usefixtures("owner")
async def test_keyword_leg_equals_bm25_from_the_chunks_through_writes_and_merges(app: Archivist) -> None:
    sources = await _corpus(app)
    await _rebuild(app)
    assert await app.db.pool.fetchval("SELECT count(*) FROM term_blocks WHERE n > 1") > 10
    oracle = await _oracle(app)
    assert await _assert_rankings(app, oracle) > 3  # some terms have more postings than are read
    assert await _assert_rankings(app, oracle, [sources[1].id]) > 0
    # writes: new chunks, text updates, deletes; before the merge (delta + dead), then after
    rng = random.Random(7)
    for i in range(12):
        await app.documents.ingest(
            sources[i % 3].id, f"new {i}", _text(rng, i % 3 == 2), "markdown", f"n:{i}", embed=False
        )
    ids = [r["id"] for r in await app.db.pool.fetch("SELECT id FROM chunks ORDER BY id LIMIT 30")]
    for cid in ids[:8]:
        await app.db.pool.execute("UPDATE chunks SET text = $2 WHERE id = $1", cid, _text(rng, False))
    gone = ids[8:16]
    await app.db.pool.execute("DELETE FROM chunks WHERE id = ANY($1::uuid[])", gone)
    assert await app.db.pool.fetchval("SELECT count(*) FROM term_dead") > 0
    assert await app.db.pool.fetchval("SELECT count(*) FROM term_delta") > 0
    for merged in (False, True):
        if merged:
            await _merge(app)
            assert await app.db.pool.fetchval("SELECT count(*) FROM term_dead") == 0
            assert await app.db.pool.fetchval("SELECT count(*) FROM term_delta") == 0
        oracle = await _oracle(app, stored_impacts=True)
        assert not set(gone) & {c for ps in oracle.postings.values() for c, *_ in ps}
        await _assert_rankings(app, oracle)
        await _assert_rankings(app, oracle, [sources[0].id])
        for query in QUERIES:  # deleted chunks are never returned
            assert not {c for c, _ in await _leg(app, query, None, **PRUNED)} & set(gone)
    # a delete after the merge, then an update of a merged chunk, unmerged
    await app.db.pool.execute("DELETE FROM chunks WHERE id = $1", ids[20])
    await app.db.pool.execute("UPDATE chunks SET text = 'alpha alpha mock.patch.object' WHERE id = $1", ids[21])
    await _assert_rankings(app, await _oracle(app, stored_impacts=True))


@pytest.mark.usefixtures("owner")
async def test_all_mode_and_pending_chunks_rank_exactly(app: Archivist, monkeypatch: pytest.MonkeyPatch) -> None:
    await _rebuild(app)
    oracle = await _oracle(app)
    for query in QUERIES:
        terms = await _query_lexemes(app, query)
        held = _holders(oracle, terms)
        scores = {c: s for c, s in _exhaustive(oracle, terms).items() if len(held[c]) == len(terms)}
        want = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        got = await _leg(app, query, None, mode="all", **FULL)
        _assert_same(got, want, query)
    # every chunk is pending (ingested without vectors): the hybrid ranks the candidates of both keyword
    # legs by their exact BM25; from the pending chunks the pending leg is exhaustive, from the postings
    # it reads as the keyword leg does
    hybrid = HybridSearch(app.db, app.settings.model_copy(update={"keyword_max_term_frequency": 1.0, **PRUNED}))
    count = await app.db.pool.fetchval("SELECT count(*) FROM chunks WHERE embedding IS NULL")
    assert count == await app.db.pool.fetchval("SELECT count(*) FROM chunks")
    for scan_max in (pending.PENDING_SCAN_MAX, 0):
        monkeypatch.setattr(pending, "PENDING_SCAN_MAX", scan_max)
        for query in QUERIES:
            terms = await _query_lexemes(app, query)
            exhaustive = _exhaustive(oracle, terms)
            if scan_max:
                want = sorted(exhaustive.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
            else:
                want = oracle.ranking(terms, None, PRUNED["bm25_postings_per_term"], 10)
            rows = await hybrid.fused_rows(SearchRequest(query, _zero(app), 10, None, pending_embeddings=count), 10)
            _assert_same([(r["chunk_id"], exhaustive[r["chunk_id"]]) for r in rows], want, (query, scan_max))


def _holders(oracle: Oracle, terms: list[str]) -> dict:
    held: dict = {}
    for t in terms:
        for c, *_ in oracle.postings.get(t, []):
            held.setdefault(c, set()).add(t)
    return held


def _exhaustive(oracle: Oracle, terms: list[str]) -> dict:
    scores: dict = {}
    for t in terms:
        if t not in oracle.postings:
            continue
        w = idf(oracle.n, len(oracle.postings[t]))
        for c, _, tf, dl in oracle.postings[t]:
            scores[c] = scores.get(c, 0.0) + w * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / oracle.avgdl))
    return scores


POSTINGS = "SELECT term, chunk_id, source_id, tf, dl FROM chunk_postings"


@pytest.mark.usefixtures("owner")
async def test_the_worker_chore_merges_when_enough_waits_or_writes_pause(app: Archivist) -> None:
    source = await app.sources.create("compact merge")
    await app.documents.ingest(source.id, "m1", "alpha kiln mock.patch.object", "markdown", "m:1", embed=False)
    before = set(await app.db.pool.fetch(POSTINGS))
    merger = PostingsMerger(app.db, threshold=10**6)
    waiting = await merger.waiting()
    assert waiting > 0
    assert await merger.step() == 0  # writes may still be coming
    assert await merger.step() == waiting  # the same number twice: writes paused, merged
    assert await merger.waiting() == 0
    assert set(await app.db.pool.fetch(POSTINGS)) == before
    # over the threshold it merges at once; as a chore, until stopped
    await app.db.pool.execute("DELETE FROM chunks WHERE source_id = $1", source.id)
    eager = PostingsMerger(app.db, threshold=1, interval=0.05)
    stop = asyncio.Event()
    chore = asyncio.create_task(eager.run(stop))
    for _ in range(100):
        if not await eager.waiting():
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(chore, 5)
    assert await eager.waiting() == 0
    assert set(await app.db.pool.fetch(POSTINGS)) == {r for r in before if r["source_id"] != source.id}
    async with app.db.pool.acquire() as conn:  # a rebuild gives the same postings
        await bm25_index.rebuild(conn)
    assert set(await app.db.pool.fetch(POSTINGS)) == {r for r in before if r["source_id"] != source.id}
    # two merges in one transaction (their work tables are dropped, not only at commit)
    await app.documents.ingest(source.id, "m2", "beta gamma", "markdown", "m:2", embed=False)
    async with app.db.pool.acquire() as conn, conn.transaction():
        assert await conn.fetchval("SELECT bm25_merge()") > 0
        assert await conn.fetchval("SELECT bm25_merge()") == 0
