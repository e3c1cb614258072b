"""Search (services/search/): BM25, hybrid and keyword legs, passages, windows, quality."""
