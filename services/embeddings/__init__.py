"""Text embedders and their factory.

Importing this package is cheap: the implementations (torch, onnxruntime) are only imported
when `create_embedder` builds one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from services.embeddings.base import Embedder
from services.embeddings.gate import QUERY, embed_in_slices, model_gate
from services.embeddings.models import ModelNotAvailable, resolve_model_path

if TYPE_CHECKING:
    from services.core.settings import Settings

__all__ = [
    "Embedder",
    "ModelNotAvailable",
    "create_embedder",
    "embed_async",
    "embed_documents_async",
    "embed_query_async",
    "resolve_model_path",
]

logger = logging.getLogger(__name__)


def configured_model_name(settings: Settings) -> str:
    """The name the configured embedder records in the database, without loading the model."""
    return f"{settings.embedding_provider}:{settings.embedding_model.strip()}"


def create_embedder(settings: Settings) -> Embedder:
    """Build the embedder selected by `settings.embedding_provider` / `settings.embedding_model`.

    Raises `ModelNotAvailable` if the model is neither packaged nor a local path.
    """
    provider = settings.embedding_provider
    spec = settings.embedding_model.strip()
    logger.info("Creating embedder: provider=%s model=%s", provider, spec)
    if provider == "sentence-transformers":
        from services.embeddings.sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(
            spec, batch_size=settings.embedding_batch_size or 32, query_prefix=settings.embedding_query_prefix
        )
    if provider == "onnx":
        from services.embeddings.onnx import ONNX_BATCH_SIZE, OnnxEmbedder

        return OnnxEmbedder(
            resolve_model_path(spec),
            query_prefix=settings.embedding_query_prefix or None,
            batch_size=settings.embedding_batch_size or ONNX_BATCH_SIZE,
            name=f"onnx:{spec}",
        )
    raise ValueError(f"Unknown embedding provider {provider!r}; expected 'sentence-transformers' or 'onnx'.")


async def embed_documents_async(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """`embedder.embed_documents` off the event loop, a few texts per turn of the model gate so searches
    get in between (or through the embedder's own `embed_documents_batched`, when it has one)."""
    batched = getattr(embedder, "embed_documents_batched", None)
    if batched is not None:
        return await batched(texts)
    return await embed_in_slices(embedder.embed_documents, list(texts), embedder.dim)


async def embed_query_async(embedder: Embedder, text: str) -> np.ndarray:
    """`embedder.embed_query` off the event loop, ahead of any waiting document embedding."""
    return await model_gate().run(QUERY, embedder.embed_query, text)


#: Alias referenced by `Embedder`'s docstring.
embed_async = embed_documents_async
