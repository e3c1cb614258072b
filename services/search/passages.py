"""Distinct results: merge adjacent chunks of one document into passages, cap results per document.

Both functions are pure (no database): they take hits best first and return hits best first.

* `merge_adjacent` - chunks of one document whose char ranges overlap or touch, or whose
  chunk indexes are consecutive, become one passage: its text spans all of them (the overlap
  between chunks is kept once), its char range is the union, its heading path the part the
  chunks share, its score and similarity the best of its parts, and it takes the rank of its
  best part. `chunk_id` is its best part's; `chunk_ids` lists every merged chunk in document order;
  `chunk_index` .. `chunk_index_end` is the range.
* `distinct_passages` - both at once over a candidate pool, as `SearchService` shows results.
* `cap_per_document` - at most `per_doc` results per document, unless fewer documents match:
  then the best of the held-back results fill the list back up to `k`, in rank order.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from models import SearchHit
from services.flags import merge_flags

#: Results one document may take in a list, unless fewer documents match.
PER_DOCUMENT = 2
#: Chunks one passage may merge: a long page whose every chunk matches still gives focused passages.
MAX_PASSAGE_CHUNKS = 3


def _touches(a: SearchHit, b: SearchHit) -> bool:
    """`b` starts inside or right after `a` (b follows a in the document)."""
    a_last = a.chunk_index_end if a.chunk_index_end is not None else a.chunk_index
    return b.char_start <= a.char_end or b.chunk_index == a_last + 1


def _joined_text(a: SearchHit, b: SearchHit) -> str:
    """a's text then b's, the overlap kept once (chunk text is content[char_start:char_end])."""
    if b.char_end <= a.char_end:
        return a.text
    if b.char_start <= a.char_end:
        return a.text + b.text[a.char_end - b.char_start :]
    gap = b.char_start - a.char_end  # chunks never start or end with whitespace: the gap is whitespace
    return a.text + (" " if gap == 1 else "\n\n") + b.text


def _common_prefix(paths: Sequence[list[str]]) -> list[str]:
    prefix = list(paths[0])
    for path in paths[1:]:
        n = 0
        while n < min(len(prefix), len(path)) and prefix[n] == path[n]:
            n += 1
        prefix = prefix[:n]
    return prefix


def _ids(hit: SearchHit) -> list[UUID]:
    return list(hit.chunk_ids) or [hit.chunk_id]


def _spans(hit: SearchHit) -> list[tuple[int, int, int]]:
    return list(hit.chunk_spans) or [(hit.char_start, hit.char_end, hit.chunk_index)]


def _merge_run(run: list[SearchHit], best_heading: bool = False) -> SearchHit:
    """One passage from hits of one document sorted by char_start, each touching the one before.
    Its heading path is the part its chunks share, or with `best_heading` its best chunk's."""
    if len(run) == 1:
        return run[0]
    text, end = run[0].text, run[0].char_end
    current = run[0]
    for nxt in run[1:]:
        text = _joined_text(current.model_copy(update={"text": text, "char_end": end}), nxt)
        end = max(end, nxt.char_end)
        current = nxt
    best = max(run, key=lambda h: h.score)
    last = run[-1].chunk_index_end if run[-1].chunk_index_end is not None else run[-1].chunk_index
    return best.model_copy(
        update={
            "chunk_id": best.chunk_id,  # the chunk that matched best: `get` by it shows the matched text
            "text": text,
            "chunk_index": run[0].chunk_index,
            "chunk_index_end": last,
            "char_start": run[0].char_start,
            "char_end": end,
            "heading_path": best.heading_path if best_heading else _common_prefix([h.heading_path for h in run]),
            "similarity": max(h.similarity for h in run),
            "chunk_ids": [cid for h in run for cid in _ids(h)],
            "flags": merge_flags(h.flags for h in run),
            "chunk_spans": [span for h in run for span in _spans(h)],
            **_page_range(run),
        }
    )


def _page_range(run: list[SearchHit]) -> dict[str, int | None]:
    """First and last page of a passage's chunks (paged documents only)."""
    starts = [h.page_start for h in run if h.page_start is not None]
    ends = [h.page_end for h in run if h.page_end is not None]
    return {"page_start": min(starts) if starts else None, "page_end": max(ends) if ends else None}


def merge_adjacent(hits: list[SearchHit], best_heading: bool = False) -> list[SearchHit]:
    """Hits (best first) with adjacent or overlapping chunks of one document merged into one
    passage each; a passage takes the place of its best part (and, with `best_heading`, the
    heading path of its best part, e.g. to cite a passage that crosses a section boundary)."""
    rank = {id(h): i for i, h in enumerate(hits)}
    by_document: dict[UUID, list[SearchHit]] = {}
    for hit in hits:
        by_document.setdefault(hit.document_id, []).append(hit)
    placed: list[tuple[int, SearchHit]] = []
    for group in by_document.values():
        ordered = sorted(group, key=lambda h: (h.char_start, h.chunk_index))
        run = [ordered[0]]
        for hit in ordered[1:]:
            tail = run[-1]
            span = max(run, key=lambda h: h.char_end)
            if _touches(span, hit) or _touches(tail, hit):
                run.append(hit)
            else:
                placed.append((min(rank[id(h)] for h in run), _merge_run(run, best_heading)))
                run = [hit]
        placed.append((min(rank[id(h)] for h in run), _merge_run(run, best_heading)))
    return [hit for _, hit in sorted(placed, key=lambda pair: pair[0])]


def cap_per_document(hits: list[SearchHit], per_doc: int = PER_DOCUMENT, k: int | None = None) -> list[SearchHit]:
    """The first `k` hits (all when None) taking at most `per_doc` per document; when that leaves
    fewer than `k`, the best held-back hits fill the gap. Rank order is kept."""
    k = len(hits) if k is None else k
    taken: list[int] = []
    held: list[int] = []
    per: dict[UUID, int] = {}
    for i, hit in enumerate(hits):
        if per.get(hit.document_id, 0) < per_doc:
            per[hit.document_id] = per.get(hit.document_id, 0) + 1
            taken.append(i)
        else:
            held.append(i)
    chosen = taken[:k]
    if len(chosen) < k:
        chosen += held[: k - len(chosen)]
    return [hits[i] for i in sorted(chosen)]


def _last_index(hit: SearchHit) -> int:
    return hit.chunk_index_end if hit.chunk_index_end is not None else hit.chunk_index


def _near(parts: list[SearchHit], hit: SearchHit) -> bool:
    """`hit` overlaps, touches or directly neighbours (by chunk index) the span of `parts`."""
    start = min(p.char_start for p in parts)
    end = max(p.char_end for p in parts)
    first = min(p.chunk_index for p in parts)
    last = max(_last_index(p) for p in parts)
    overlaps = hit.char_start <= end and hit.char_end >= start
    return overlaps or hit.chunk_index == last + 1 or _last_index(hit) == first - 1


def _same_section(a: SearchHit, b: SearchHit) -> bool:
    """Chunks of one document under the same headings: a passage keeps one heading path."""
    return a.document_id == b.document_id and a.heading_path == b.heading_path


def distinct_passages(hits: list[SearchHit], k: int, per_doc: int = PER_DOCUMENT) -> list[SearchHit]:
    """What a result list shows, from a candidate pool (best first): walking the pool in rank order,
    a chunk next to a passage already listed, in the same section, joins it (up to MAX_PASSAGE_CHUNKS chunks a passage;
    past that it is dropped as a mere neighbour), any other starts a new passage while its
    document has fewer than `per_doc`; the walk stops once `k` passages are listed (so only chunks
    ranked above that point merge). Too few documents: held-back chunks fill the list."""
    passages: list[list[SearchHit]] = []  # parts of each passage, in list order
    held: list[SearchHit] = []
    per: dict[UUID, int] = {}

    def join(hit: SearchHit) -> bool:
        """Merge `hit` into the passage(s) it touches; a neighbour of a full passage is absorbed
        (dropped: it is not a distinct result)."""
        near = [p for p in passages if _same_section(p[0], hit) and _near(p, hit)]
        if not near:
            return False
        if sum(len(p) for p in near) >= MAX_PASSAGE_CHUNKS:
            return True
        near[0].append(hit)
        for other in near[1:]:  # the chunk bridges two passages: they become one
            near[0].extend(other)
            passages.remove(other)
            per[hit.document_id] -= 1
        return True

    for hit in hits:
        if len(passages) >= k:
            break
        if join(hit):
            continue
        if per.get(hit.document_id, 0) < per_doc:
            per[hit.document_id] = per.get(hit.document_id, 0) + 1
            passages.append([hit])
        else:
            held.append(hit)
    for hit in held:
        if len(passages) >= k:
            break
        if not join(hit):
            passages.append([hit])
    return [_merge_run(sorted(parts, key=lambda h: (h.char_start, h.chunk_index))) for parts in passages]
