"""Keyword-term pruning (real PostgreSQL statistics) and cross-encoder fusion."""

from __future__ import annotations

import pytest

from services.app import Archivist
from services.core.settings import Settings
from services.search.hybrid import informative_terms, or_query, quote_lexeme
from services.search.rerank import fuse, linear_scores, rrf_scores


def test_informative_terms_drop_common_ones_but_never_all() -> None:
    freqs = {"cell": 0.30, "protein": 0.12, "kinas": 0.01}
    assert informative_terms(["cell", "protein", "kinas", "zebrafish"], freqs, 0.05) == ["kinas", "zebrafish"]
    assert informative_terms(["cell", "protein"], freqs, 0.05) == ["protein", "cell"]  # the rarest two
    assert informative_terms([], freqs, 0.05) == []


def test_or_query_quotes_lexemes_literally() -> None:
    assert or_query([]) is None
    assert or_query(["o'brien", "a\\b"]) == "'o''brien' | 'a\\\\b'"
    assert quote_lexeme("docs.python.org") == "'docs.python.org'"


@pytest.mark.usefixtures("owner")
async def test_common_terms_are_pruned_with_real_statistics(app: Archivist) -> None:
    source = await app.sources.create("Pruning")
    docs = [f"Report {i}: the laboratory measured sample {i} carefully." for i in range(40)]
    docs.append("The laboratory discovered a luminescent axolotl in sample forty.")
    for text in docs:
        await app.documents.create_from_text(source.id, text)
    await app.db.pool.execute("ANALYZE chunks")
    hybrid = app.search.strategy("hybrid")
    hybrid.term_stats._loaded_at = float("-inf")  # re-read the statistics ANALYZE just wrote
    assert await hybrid.term_stats.frequencies() == {}  # 41 chunks: every term is counted, not estimated
    hybrid.term_stats.min_chunks, hybrid.term_stats._loaded_at = 0, float("-inf")  # a "large" corpus
    frequencies = await hybrid.term_stats.frequencies()
    assert frequencies["laboratori"] > 0.5 and frequencies.get("axolotl", 0.0) < 0.05
    assert await hybrid.keyword_query("laboratory axolotl") == "'axolotl'"
    assert await hybrid.keyword_query("the laboratory") == "'laboratori'"  # only common terms: kept
    assert await hybrid.keyword_query("the of and") is None  # only stopwords: no keyword leg
    found = await app.search.search("luminescent axolotl laboratory", source.id, 3, "hybrid")
    assert "axolotl" in found.hits[0].text
    stopwords_only = await app.search.search("the of and", source.id, 3, "hybrid")
    assert len(stopwords_only.hits) == 3 and {h.match_type for h in stopwords_only.hits} == {"vector"}


def test_linear_fusion_mixes_normalised_scores() -> None:
    scores = linear_scores([2.0, 0.0, 4.0], [0.3, 0.2, 0.1], weight=0.7)
    assert scores == pytest.approx([0.7 * 0.5 + 0.3 * 1.0, 0.0 + 0.3 * 0.5, 0.7 * 1.0 + 0.0])


def test_rrf_fusion_rewards_agreement() -> None:
    scores = rrf_scores([5.0, 1.0, 3.0], weight=0.7, k=60)
    assert scores[0] == pytest.approx(1.0)  # first in both orders
    assert scores[2] > scores[1]  # the cross-encoder (weight 0.7) prefers the third candidate


@pytest.mark.parametrize("mode", ["replace", "rrf", "linear"])
def test_fuse_gives_zero_to_one_scores(mode: str) -> None:
    settings = Settings(_env_file=None, rerank_fusion=mode, rerank_weight=0.7)
    scores = fuse([3.2, -1.5, 0.4, 7.0], [0.9, 0.8, 0.7, 0.6], settings)
    assert len(scores) == 4 and all(0.0 <= s <= 1.0 for s in scores)
    # replace/linear follow the cross-encoder's clear favourite; rrf (w 0.7, k 60) keeps the first
    # stage's top candidate: 0.7/62 + 0.3/61 > 0.7/61 + 0.3/64
    expected_top = {"replace": 3, "linear": 3, "rrf": 0}[mode]
    assert max(range(4), key=lambda i: scores[i]) == expected_top
