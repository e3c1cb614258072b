"""Embedder backed by an ONNX encoder (onnxruntime + a `tokenizers` tokenizer.json).

Also home to the small ONNX helpers shared with `services.reranking.onnx_cross_encoder`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from services.embeddings.base import Embedder
from services.embeddings.models import ModelNotAvailable, cpu_threads

if TYPE_CHECKING:
    import onnxruntime as ort
    from tokenizers import Encoding, Tokenizer

logger = logging.getLogger(__name__)

Pooling = Literal["cls", "mean"]

#: Texts per session run. The shipped int8 models quantise each run's activations with one scale, and
#: one text per run measured fastest per chunk (PostgreSQL docs chunks, 2 cores, 2 calls side by side:
#: batch 1 39.9, batch 2 35.4, batch 4 28.7 chunks/s; bench/embedder.py): less padding, activations
#: that stay in cache, and a document's vector no longer depends on what it was batched with.
ONNX_BATCH_SIZE = 1

BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "


# --- shared ONNX helpers ---------------------------------------------------------------------------


def find_onnx_file(model_dir: Path) -> Path:
    """The ONNX graph inside a model directory (``model.onnx``, or ``onnx/model.onnx``)."""
    for candidate in (model_dir / "model.onnx", model_dir / "onnx" / "model.onnx"):
        if candidate.is_file():
            return candidate
    found = sorted(model_dir.glob("*.onnx"))
    if found:
        return found[0]
    raise ModelNotAvailable(
        f"No ONNX model (model.onnx) found in {model_dir}.",
        "Use an ONNX model directory with the 'onnx' provider, or the 'sentence-transformers' provider.",
    )


def create_session(onnx_path: Path, threads: int | None = None, spinning: bool = False) -> ort.InferenceSession:
    """CPU inference session using every available core for intra-op parallelism.

    Intra-op threads do not spin-wait between calls (unless `spinning`): on a small shared machine
    (database, crawler, event loop) spinning burnt CPU and measured ~15% slower under contention.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    options.intra_op_num_threads = threads or cpu_threads()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])


def load_tokenizer(model_dir: Path) -> Tokenizer:
    """Load ``tokenizer.json`` with its bundled padding/truncation settings switched off."""
    from tokenizers import Tokenizer

    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise ModelNotAvailable(
            f"No tokenizer.json found in {model_dir}.",
            "ONNX models need a Hugging Face fast-tokenizer file (tokenizer.json) next to model.onnx.",
        )
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from disk, or {} if the file is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def model_max_length(model_dir: Path, requested: int) -> int:
    """`requested`, capped by the model's position embeddings / packaged max_length if known."""
    limits = [requested]
    for name, key in (("config.json", "max_position_embeddings"), ("vectrix_config.json", "max_length")):
        value = read_json(model_dir / name).get(key)
        if isinstance(value, int) and value > 0:
            limits.append(value)
    return min(limits)


def session_input_names(session: ort.InferenceSession) -> set[str]:
    """Names of the graph inputs (e.g. whether it takes ``token_type_ids``)."""
    return {inp.name for inp in session.get_inputs()}


def pad_batch(encodings: Sequence[Encoding]) -> dict[str, np.ndarray]:
    """Right-pad a batch of encodings into int64 input_ids / attention_mask / token_type_ids."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        ids[row, :n] = enc.ids
        mask[row, :n] = enc.attention_mask
        types[row, :n] = enc.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def run_session(session: ort.InferenceSession, arrays: dict[str, np.ndarray], input_names: set[str]) -> Any:
    """Run the graph on the arrays it accepts (e.g. skipping token_type_ids); returns output 0."""
    feeds = {name: arr for name, arr in arrays.items() if name in input_names}
    return session.run(None, feeds)[0]


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Index batches ordered by length (longest first) so each batch pads little."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


# --- pooling / model defaults --------------------------------------------------------------------------


def is_bge(model_dir: Path) -> bool:
    """Whether the directory holds a BAAI bge model (by name or config)."""
    origin = str(read_json(model_dir / "config.json").get("_name_or_path", ""))
    return "bge" in model_dir.name.lower() or "bge" in origin.lower()


def default_pooling(model_dir: Path) -> Pooling:
    """Pooling from a sentence-transformers ``1_Pooling/config.json``; else CLS for bge, mean otherwise."""
    pooling_cfg = read_json(model_dir / "1_Pooling" / "config.json")
    if pooling_cfg.get("pooling_mode_cls_token"):
        return "cls"
    if pooling_cfg.get("pooling_mode_mean_tokens"):
        return "mean"
    return "cls" if is_bge(model_dir) else "mean"


def default_query_prefix(model_dir: Path) -> str:
    """The retrieval instruction a model expects on queries ('' if none is known)."""
    return BGE_QUERY_PREFIX if is_bge(model_dir) else ""


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: Pooling) -> np.ndarray:
    """CLS or masked-mean pooling followed by L2 normalisation; returns float32 (batch, dim)."""
    if pooling == "cls":
        vectors = hidden[:, 0, :]
    else:
        weights = mask[:, :, None].astype(np.float32)
        vectors = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


# --- embedder ------------------------------------------------------------------------------------------


class OnnxEmbedder(Embedder):
    """Transformer encoder exported to ONNX; tokenised with `tokenizers`, pooled and L2-normalised.

    `pooling` and `query_prefix` default (None) to what the model expects: CLS pooling and the
    "Represent this sentence..." instruction for bge models, mean pooling and no prefix otherwise.
    """

    def __init__(
        self,
        model_dir: str | Path,
        pooling: Pooling | None = None,
        query_prefix: str | None = None,
        batch_size: int = ONNX_BATCH_SIZE,
        max_length: int = 512,
        *,
        name: str | None = None,
        threads: int | None = 1,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.pooling: Pooling = pooling or default_pooling(self.model_dir)
        if self.pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {self.pooling!r}")
        self.query_prefix = default_query_prefix(self.model_dir) if query_prefix is None else query_prefix
        self.batch_size = max(1, batch_size)
        self.max_length = model_max_length(self.model_dir, max_length)
        self.name = name or f"onnx:{self.model_dir.name}"
        # One intra-op thread per call by default: the model gate runs one call per core side by side,
        # and a 2-thread call spent ~30% more CPU per text (thread hand-offs) for little less wall time.
        self._session = create_session(find_onnx_file(self.model_dir), threads=threads)
        self._inputs = session_input_names(self._session)
        self._tokenizer = load_tokenizer(self.model_dir)
        self._tokenizer.enable_truncation(self.max_length)
        self.dim = self._output_dim()
        logger.info(
            "Loaded embedder %s (dim %d, %s pooling, max_length %d) from %s",
            self.name,
            self.dim,
            self.pooling,
            self.max_length,
            self.model_dir,
        )

    def _output_dim(self) -> int:
        """Hidden size from the graph's output shape, or by embedding a probe text."""
        shape = self._session.get_outputs()[0].shape
        if shape and isinstance(shape[-1], int):
            return int(shape[-1])
        return int(self._embed(["dimension probe"]).shape[1])

    def _run(self, encodings: Sequence[Encoding]) -> np.ndarray:
        arrays = pad_batch(encodings)
        hidden = run_session(self._session, arrays, self._inputs)
        return pool(hidden, arrays["attention_mask"], self.pooling)

    def _embed(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        out = np.empty((len(texts), 0), dtype=np.float32)
        for batch in length_sorted_batches([len(e.ids) for e in encodings], self.batch_size):
            vectors = self._run([encodings[i] for i in batch])
            if out.shape[1] == 0:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
        return out

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages (longest first, in padded batches); rows follow the input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed(list(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query with the query instruction prepended; shape (dim,)."""
        return self._embed([self.query_prefix + text])[0]
