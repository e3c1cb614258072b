"""Cross-encoder rerankers and their factory.

Importing this package is cheap: implementations (onnxruntime, torch) load inside `create_reranker`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from services.embeddings.gate import QUERY, model_gate
from services.embeddings.models import ModelNotAvailable, resolve_model_path
from services.reranking.base import Reranker

if TYPE_CHECKING:
    from services.core.settings import Settings

__all__ = ["ModelNotAvailable", "Reranker", "create_reranker", "score_async"]

logger = logging.getLogger(__name__)


def create_reranker(settings: Settings) -> Reranker:
    """Build the reranker selected by `settings.reranker_provider` / `settings.reranker_model`.

    Raises `ModelNotAvailable` if the model is neither packaged nor a local path.
    """
    provider = settings.reranker_provider
    spec = settings.reranker_model.strip()
    logger.info("Creating reranker: provider=%s model=%s", provider, spec)
    if provider == "onnx":
        from services.reranking.onnx_cross_encoder import OnnxCrossEncoder

        return OnnxCrossEncoder(resolve_model_path(spec), max_length=settings.rerank_max_length, name=f"onnx:{spec}")
    if provider == "onnx-late-interaction":
        from services.reranking.onnx_late_interaction import OnnxLateInteraction

        path = resolve_model_path(spec)
        return OnnxLateInteraction(path, max_length=settings.rerank_max_length, name=f"onnx-late:{spec}")
    if provider == "sentence-transformers":
        from services.reranking.sentence_transformers import SentenceTransformerCrossEncoder

        return SentenceTransformerCrossEncoder(spec, max_length=settings.rerank_max_length)
    raise ValueError(f"Unknown reranker provider {provider!r}; expected 'onnx' or 'sentence-transformers'.")


async def score_async(reranker: Reranker, query: str, passages: list[str]) -> list[float]:
    """`reranker.score` in a worker thread, keeping the event loop responsive."""
    return await model_gate().run(QUERY, reranker.score, query, passages)
