"""Helpers every benchmark shares: where caches live, what machine a figure came from, which settings."""

from __future__ import annotations

import os
import platform
import re
import socket
from pathlib import Path
from typing import Any

from services.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / "bench" / ".cache"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def settings_summary(settings: Settings) -> dict[str, Any]:
    keys = [
        "embedding_provider",
        "embedding_model",
        "chunk_size",
        "chunk_overlap",
        "fts_config",
        "hnsw_ef_search",
        "hybrid_candidates",
        "rrf_k",
        "hybrid_vector_weight",
        "hybrid_keyword_weight",
        "reranker_model",
        "rerank_candidates",
        "rerank_max_length",
        "rerank_fusion",
        "rerank_weight",
        "rerank_rrf_k",
        "keyword_ranking",
        "hybrid_fusion",
        "bm25_postings_per_term",
        "bm25_candidates",
    ]
    return {k: getattr(settings, k) for k in keys if hasattr(settings, k)}


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
