"""BEIR files for bench/beir.py: corpus, queries and judgments, and the fixed tune / held-out
split of the judged queries."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

URL_PREFIX = "beir:"


# --- data ------------------------------------------------------------------------------------------------


@dataclass
class BeirDoc:
    doc_id: str
    title: str
    text: str


def read_corpus(path: Path) -> list[BeirDoc]:
    """BEIR corpus.jsonl: one {"_id", "title", "text"} object per line."""
    docs = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                obj = json.loads(line)
                docs.append(BeirDoc(str(obj["_id"]), (obj.get("title") or "").strip(), obj.get("text") or ""))
    return docs


def read_queries(path: Path) -> dict[str, str]:
    """BEIR queries.jsonl: {"_id", "text"} per line."""
    queries = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                obj = json.loads(line)
                queries[str(obj["_id"])] = obj["text"]
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels TSV with a header: query-id, corpus-id, score."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader, None)
        for row in reader:
            if len(row) >= 3:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


SPLITS = ("all", "tune", "heldout", "both")


def query_half(query_id: str) -> str:
    """The half a judged query is in, "tune" or "heldout": fixed by the SHA-256 of its id (about half each)."""
    return "tune" if hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0 else "heldout"


def split_queries(queries: dict[str, str], split: str) -> dict[str, str]:
    """The queries of one half ("tune" / "heldout"), or all of them ("all" / "both")."""
    if split in ("all", "both"):
        return dict(queries)
    return {q: t for q, t in queries.items() if query_half(q) == split}


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- settings and cache location -----------------------------------------------------------------------
