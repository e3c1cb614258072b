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


#: CPU extensions that set the embedder's speed: the shipped model is int8, and the same PostgreSQL chunks cost
#: 0.23 ms of one core a token on a host with AVX-512 VNNI and 0.54-0.59 with AVX2 alone, the same code and
#: onnxruntime (bench/RESULTS.md, 2026-11-29 "the embedding rate is the CPU's"): a chunks/s figure means
#: little without them.
INT8_EXTENSIONS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def cpu_extensions(flags: str) -> list[str]:
    """The `INT8_EXTENSIONS` in a /proc/cpuinfo `flags` line."""
    present = set(flags.split())
    return [name for name in INT8_EXTENSIONS if name in present]


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
            if key.strip() == "flags":
                break  # the first processor's block is enough
    except OSError:
        pass
    return {
        "cpu": fields.get("model name", cpu),
        "cpu_model": f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}",
        "cpu_extensions": cpu_extensions(fields.get("flags", "")),
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def cpu_line(machine: dict[str, Any]) -> str:
    """'AMD EPYC (family 25 model 1), avx2', as a report's header names the CPU."""
    extensions = ", ".join(machine.get("cpu_extensions") or ["no AVX2"])
    vnni = any("vnni" in name for name in machine.get("cpu_extensions") or [])
    return f"{machine['cpu']} ({machine.get('cpu_model', '?')}), {extensions}{'' if vnni else ' (no VNNI: slow int8)'}"


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
