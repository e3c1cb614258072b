"""Embedders and rerankers (services/embeddings/, services/reranking/) and the model gate."""
