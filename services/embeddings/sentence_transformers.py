"""Embedder backed by a local sentence-transformers model (PyTorch, CPU)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from services.embeddings.base import Embedder
from services.embeddings.models import (
    ModelNotAvailable,
    ensure_offline,
    quiet_transformers,
    require_sentence_transformers,
    resolve_model_path,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)


def load_sentence_transformer(path: Path) -> SentenceTransformer:
    """Load a SentenceTransformer from a local directory on CPU, strictly offline."""
    require_sentence_transformers()
    ensure_offline()
    quiet_transformers()
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except Exception as exc:  # any load failure means the model is unusable
        raise ModelNotAvailable(
            f"Could not load a sentence-transformers model from {path}: {exc}",
            "Point the model setting at a sentence-transformers model directory "
            "(or use the 'onnx' provider for ONNX models).",
        ) from exc


class SentenceTransformerEmbedder(Embedder):
    """sentence-transformers model on CPU; embeddings are L2-normalised float32."""

    def __init__(self, model: str, batch_size: int = 32, query_prefix: str = "") -> None:
        path = resolve_model_path(model)
        self._model = load_sentence_transformer(path)
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.name = f"sentence-transformers:{model.strip()}"
        dim = self._model.get_embedding_dimension()
        if not dim:
            dim = int(self._encode(["dimension probe"]).shape[1])
        self.dim = int(dim)
        logger.info("Loaded embedder %s (dim %d) from %s", self.name, self.dim, path)

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages; shape (len(texts), dim)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(list(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query, prefixed with `query_prefix`; shape (dim,)."""
        return self._encode([self.query_prefix + text])[0]
