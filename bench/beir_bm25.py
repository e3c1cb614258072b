"""A BM25 baseline on the very queries bench/beir.py runs, so every SciFact figure has one beside it.

    .venv/bin/python bench/beir_bm25.py --corpus ../shared/data/scifact/corpus.jsonl \\
        --queries ../shared/data/scifact/queries.jsonl --qrels ../shared/data/scifact/qrels/train.tsv [--split both]

Published SciFact figures (BEIR's BM25 0.665, MTEB's model scores) are on the 300 *test* queries; only
the 809 *train* queries are judged here, so a published figure is no baseline for ours. This scores
rank-bm25's BM25Okapi (k1 1.5, b 0.75) over each document's title and text, lower-cased `\\w+` tokens,
document level, with the metrics of bench/metrics.py, on the same split (`tune`, `heldout`, `both`,
`all`, as bench/beir.py).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.beir_data import SPLITS, query_half, read_corpus, read_qrels, read_queries, split_queries  # noqa: E402
from bench.metrics import evaluate  # noqa: E402

WORD = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--qrels", type=Path, required=True)
    parser.add_argument("--split", choices=SPLITS, default="all")
    args = parser.parse_args(argv)
    from rank_bm25 import BM25Okapi

    docs = read_corpus(args.corpus)
    qrels = read_qrels(args.qrels)
    queries = split_queries({q: t for q, t in read_queries(args.queries).items() if q in qrels}, args.split)
    bm25 = BM25Okapi([tokens(f"{d.title} {d.text}") for d in docs])
    run = {}
    for qid, text in queries.items():
        scores = bm25.get_scores(tokens(text))
        run[qid] = [docs[i].doc_id for i in np.argsort(-scores)[:100]]
    halves = ("tune", "heldout") if args.split == "both" else (args.split,)
    for half in halves:
        part = {q: r for q, r in run.items() if half == "all" or query_half(q) == half}
        scores = evaluate(part, qrels)
        print(
            f"bm25 (rank-bm25) [{half}]  queries {scores['queries']}  nDCG@10 {scores['ndcg@10']:.4f}  "
            f"R@100 {scores['recall@100']:.4f}  MRR@10 {scores['mrr@10']:.4f}"
        )


if __name__ == "__main__":
    main()
