"""Embedder interface: turns texts into L2-normalised float32 vectors."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class Embedder(ABC):
    """A text embedding model. Implementations are CPU-bound and synchronous;
    callers run them in a thread (see `services.embeddings.embed_async`)."""

    #: Stable identifier recorded in the database (provider + model).
    name: str
    #: Vector dimension.
    dim: int

    @abstractmethod
    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages; returns an array of shape (len(texts), dim), rows unit-length."""

    @abstractmethod
    def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query (may add a query instruction); shape (dim,)."""
