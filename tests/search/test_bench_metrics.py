"""bench.metrics against values computed by hand (trec_eval's definitions; pytrec_eval cannot be built here)."""

from __future__ import annotations

import math

import pytest

from bench.metrics import dedupe, evaluate, first_ranks, hit_scores, mrr_at_k, ndcg_at_k, percentile, recall_at_k

LOG2_3 = math.log2(3)
LOG2_4 = 2.0
LOG2_5 = math.log2(5)


def test_ndcg_binary_hand_computed() -> None:
    judged = {"a": 1, "b": 1}
    # relevant at ranks 2 and 4: DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3)
    expected = (1 / LOG2_3 + 1 / LOG2_5) / (1 + 1 / LOG2_3)
    assert ndcg_at_k(["x", "a", "y", "b"], judged, 10) == pytest.approx(expected)
    assert ndcg_at_k(["x", "a", "y", "b"], judged, 10) == pytest.approx(0.6509209298)


def test_ndcg_graded_uses_linear_gain() -> None:
    judged = {"a": 2, "b": 1, "c": 0}
    # ranks: b (1), a (2), c (3): DCG = 1 + 2/log2(3); ideal a, b: 2 + 1/log2(3)
    expected = (1 + 2 / LOG2_3) / (2 + 1 / LOG2_3)
    assert ndcg_at_k(["b", "a", "c"], judged, 10) == pytest.approx(expected)


def test_ndcg_cut_applies_to_run_and_ideal() -> None:
    judged = {"a": 1, "b": 1, "c": 1}
    # k=2: only rank 2 is relevant in the run; ideal is two relevant docs
    expected = (1 / LOG2_3) / (1 + 1 / LOG2_3)
    assert ndcg_at_k(["x", "a", "b"], judged, 2) == pytest.approx(expected)


def test_ndcg_perfect_empty_and_unjudged() -> None:
    assert ndcg_at_k(["a", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1.0)
    assert ndcg_at_k([], {"a": 1}, 10) == 0.0
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0


def test_duplicates_count_once() -> None:
    # two chunks of "x" must not push "a" down
    assert dedupe(["x", "x", "a"]) == ["x", "a"]
    assert ndcg_at_k(["x", "x", "a"], {"a": 1}, 2) == pytest.approx(1 / LOG2_3)
    assert mrr_at_k(["x", "x", "a"], {"a": 1}, 10) == pytest.approx(0.5)


def test_recall_and_mrr() -> None:
    judged = {"a": 1, "b": 1, "c": 1, "d": 0}
    ranking = ["d", "x", "a", "c"]
    assert recall_at_k(ranking, judged, 100) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, judged, 3) == pytest.approx(1 / 3)
    assert mrr_at_k(ranking, judged, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(ranking, judged, 2) == 0.0


def test_evaluate_means_over_judged_queries_only() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = {"q1": ["a"], "q2": ["x", "y", "z", "b"], "q3": ["a"]}
    scores = evaluate(run, qrels)
    assert scores["queries"] == 2
    assert scores["ndcg@10"] == pytest.approx((1 + 1 / LOG2_5) / 2)
    assert scores["mrr@10"] == pytest.approx((1 + 1 / 4) / 2)
    assert scores["recall@100"] == pytest.approx(1.0)


def test_percentile_matches_numpy_linear() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 95) == pytest.approx(4.8)
    assert percentile([7.0], 95) == 7.0


def test_scifact_halves_are_fixed_and_partition_the_queries() -> None:
    from bench.beir_data import query_half, split_queries

    queries = {str(i): f"claim {i}" for i in range(400)}
    tune, heldout = split_queries(queries, "tune"), split_queries(queries, "heldout")
    assert set(tune) | set(heldout) == set(queries) and not set(tune) & set(heldout)
    assert 150 < len(tune) < 250  # about half each
    assert split_queries(queries, "both") == queries == split_queries(queries, "all")
    assert query_half("1") == query_half("1") and {query_half(q) for q in queries} == {"tune", "heldout"}


def test_docs_page_ranks_and_hit_scores() -> None:
    """bench/docs.py: the first target page of each question in its top 10, any of several targets."""
    rankings = [["a", "b", "c"], ["x", "y", "b"], ["p"] * 10 + ["t"], []]
    targets = [["a"], ["b", "y"], ["t"], ["a"]]
    assert first_ranks(rankings, targets) == [1, 2, None, None]
    assert hit_scores(rankings, targets) == {"hit@1": 0.25, "hit@5": 0.5, "mrr@10": round((1 + 0.5) / 4, 3)}
