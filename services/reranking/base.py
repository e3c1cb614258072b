"""Reranker interface: a cross-encoder that scores (query, passage) pairs."""

from __future__ import annotations

from abc import ABC, abstractmethod


class Reranker(ABC):
    name: str

    @abstractmethod
    def score(self, query: str, passages: list[str]) -> list[float]:
        """Relevance logits, one per passage (higher = more relevant). Synchronous, CPU-bound."""
