"""Answer-ready context: search hits packed into numbered passages within a token budget.

Tokens are counted with the embedding model's own tokenizer. Neighbouring chunks of a document
are merged into one passage (`merge_neighbours`, the merge result lists use), near-duplicate
passages are dropped, and passages are packed best first until the budget is spent.

Budgets stop at relevance (issue 29, point 5): a passage scoring under `min_ratio` of the best
passage's score is left out even when the budget has room, so a small budget is not filled with an
unrelated second passage.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from models import SearchHit
from services.core.database import Database
from services.core.errors import InvalidArgument
from services.embeddings.base import Embedder
from services.search.passages import merge_adjacent

MIN_TOKENS = 50
MAX_TOKENS = 8000
PASSAGE_CHAR_LIMIT = 4000
DUPLICATE_SIMILARITY = 0.85
WORD = re.compile(r"\w+")

TokenCounter = Callable[[str], int]
_counters: dict[int, TokenCounter] = {}


def token_counter(embedder: Embedder) -> TokenCounter:
    """Count tokens as the embedding model does (its tokenizer, no special tokens, no truncation)."""
    key = id(embedder)
    if key not in _counters:
        _counters[key] = _build_counter(embedder)
    return _counters[key]


def _build_counter(embedder: Embedder) -> TokenCounter:
    model_dir = getattr(embedder, "model_dir", None)
    if model_dir is not None:  # ONNX: a fresh tokenizer.json without the embedder's truncation
        from services.embeddings.onnx import load_tokenizer

        tokenizer = load_tokenizer(model_dir)
        return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)
    model = getattr(embedder, "_model", None)
    hf = getattr(model, "tokenizer", None)
    if hf is not None:  # sentence-transformers: its Hugging Face tokenizer
        return lambda text: len(hf(text, add_special_tokens=False, verbose=False)["input_ids"])
    return lambda text: -(-len(WORD.findall(text)) * 4 // 3)  # no tokenizer: a cautious estimate


def check_max_tokens(max_tokens: int) -> int:
    if not MIN_TOKENS <= max_tokens <= MAX_TOKENS:
        raise InvalidArgument(
            f"max_tokens must be between {MIN_TOKENS} and {MAX_TOKENS} (got {max_tokens}).",
            "Use e.g. max_tokens=1500 for a few passages of context.",
        )
    return max_tokens


@dataclass
class Span:
    """One passage of a document: a hit whose touching neighbours are merged into it."""

    hit: SearchHit
    char_start: int
    char_end: int
    text: str = ""


@dataclass
class Passage:
    n: int
    text: str
    tokens: int
    span: Span
    truncated: bool = False
    citation: dict[str, Any] = field(default_factory=dict)


def merge_neighbours(hits: list[SearchHit]) -> list[Span]:
    """Hits of one document whose chunks touch or overlap become one span (the same merge as
    result lists, `passages.merge_adjacent`), cited under the heading of its best chunk; best span first."""
    return [Span(h, h.char_start, h.char_end) for h in merge_adjacent(hits, best_heading=True)]


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def near_duplicate(text: str, kept: list[set[str]]) -> bool:
    mine = words(text)
    for other in kept:
        union = len(mine | other)
        if union and len(mine & other) / union >= DUPLICATE_SIMILARITY:
            return True
    return False


def cut_to_tokens(text: str, budget: int, count: TokenCounter) -> str:
    """The longest prefix of `text` (ending at a word boundary) within `budget` tokens."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    prefix = text[:low]
    if low < len(text) and " " in prefix:
        prefix = prefix[: prefix.rfind(" ")]
    return prefix.rstrip()


async def fill_text(db: Database, spans: list[Span]) -> None:
    """Each span's exact text from its document (chunks are offset-exact, overlaps appear once)."""
    rows = await db.pool.fetch(
        "SELECT s.i, substr(d.content, s.a + 1, s.b - s.a) AS text FROM unnest($1::uuid[], $2::int[], $3::int[]) "
        "WITH ORDINALITY AS s(doc, a, b, i) JOIN documents d ON d.id = s.doc",
        [s.hit.document_id for s in spans],
        [s.char_start for s in spans],
        [min(s.char_end, s.char_start + PASSAGE_CHAR_LIMIT) for s in spans],
    )
    texts = {r["i"]: r["text"] for r in rows}
    for i, span in enumerate(spans, 1):
        span.text = texts.get(i) or span.hit.text
        span.char_end = span.char_start + len(span.text)


def citation(span: Span) -> dict[str, Any]:
    hit = span.hit
    return {
        "document_id": str(hit.document_id),
        "document_title": hit.document_title[:200],
        "url": hit.url,
        "heading_path": hit.heading_path,
        "char_start": span.char_start,
        "char_end": span.char_end,
        "chunk_ids": [str(cid) for cid in (hit.chunk_ids or [hit.chunk_id])],
    }


def relevant(spans: list[Span], min_ratio: float) -> tuple[list[Span], int]:
    """The spans scoring at least `min_ratio` of the best one's (the best is always kept), and how many
    were left out."""
    if not spans:
        return spans, 0
    floor = max(s.hit.score for s in spans) * min_ratio
    kept = [s for i, s in enumerate(spans) if i == 0 or s.hit.score >= floor]
    return kept, len(spans) - len(kept)


@dataclass
class Packed:
    passages: list[Passage]
    #: passages left out as far below the best one's score
    below_relevance: int = 0


async def pack_context(
    db: Database, hits: list[SearchHit], max_tokens: int, count: TokenCounter, min_ratio: float = 0.0
) -> Packed:
    """Passages within `max_tokens` (their text counted with `count`), best first, numbered from 1;
    those under `min_ratio` of the best passage's score left out."""
    spans, dropped = relevant(merge_neighbours(hits), min_ratio)
    if not spans:
        return Packed([])
    await fill_text(db, spans)
    passages: list[Passage] = []
    kept_words: list[set[str]] = []
    used = 0
    for span in spans:
        if near_duplicate(span.text, kept_words):
            continue
        left = max_tokens - used
        tokens = count(span.text)
        text, truncated = span.text, False
        if tokens > left:
            if left < MIN_TOKENS and passages:
                continue
            text, truncated = cut_to_tokens(span.text, left, count), True
            tokens = count(text)
            if not text or tokens > left:
                continue
        used += tokens
        kept_words.append(words(text))
        passage = Passage(len(passages) + 1, text, tokens, span, truncated)
        passage.citation = citation(span)
        if truncated:
            passage.citation["char_end"] = span.char_start + len(text)
        passages.append(passage)
    return Packed(passages, dropped)
