"""How a search result is shown: every hit of a reply goes through `hit_views`, once.

The fewest tokens that still answer (issue 29, point 7): each fact is said once and the contract's
fields are always there; the rest comes on request.

* Always: `chunk_id`, `document_id`, `document_title`, `text`, `score`, `match_type`, `metadata`
  (exactly the contract's three keys: `source_id`, `chunk_index`, `url`), `char_start` / `char_end`
  (the window shown) and `truncated`.
* When they apply: `page_number` (PDF, PPTX), `path` / `line_start` / `line_end` (and `commit` from a
  git source) for code, `version` for a versioned source, `flags` for a passage with injection flags
  (docs/flags.md).
* On request, by name in `fields`: `heading_path`, `similarity`, `chunk_ids` (with `chunk_index_end`),
  `uri`, `source_title`, `document_metadata` (cut), `freshness` (`fetched_at` / `ingested_at`,
  `indexed_at`, `last_modified`); `all` for every one.

`text` is a window of the passage centred on its best-matching span (services/search/window.py);
`chunk_id` / `chunk_index` name the chunk holding that span, so `manage_document(action="get",
chunk_id=...)` shows it. A profile's output settings (snippet length, extra fields) plug in as a
`HitShape` like the call's `fields`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from models import SearchHit
from services.access.profile_settings import HIT_DEFAULT_FIELDS, HIT_OPTIONAL_FIELDS, OutputSettings, check_fields
from services.search.window import Window, occurrences, stemmer_for, term_weights, window
from tools.common import TEXT_LIMIT, TITLE_LIMIT, cut, document_uri, metadata_view, page_number_field

OPTIONAL_FIELDS = HIT_OPTIONAL_FIELDS
#: the keys a default field stands for in a hit (the others are their own key)
DEFAULT_KEYS = {"path": ("path", "line_start", "line_end", "commit")}


@dataclass(frozen=True)
class HitShape:
    """What each hit carries beyond the defaults, which defaults it leaves out, and how long its text
    window is."""

    fields: frozenset[str] = field(default_factory=frozenset)
    snippet_chars: int = TEXT_LIMIT
    left_out: frozenset[str] = field(default_factory=frozenset)

    def including(self, names: Iterable[str] | None) -> HitShape:
        """This shape with more optional fields (validated names; `all` is every one)."""
        return HitShape(self.fields | check_fields(names), self.snippet_chars, self.left_out)


def shape_for(settings: OutputSettings) -> HitShape:
    """The shape a search's hits take before the call's own `fields`: a profile's output settings
    (services/access/profile_settings.py: snippet length, the fields its hits carry)."""
    carried = set(settings.carried())
    return HitShape(
        frozenset(carried & set(OPTIONAL_FIELDS)),
        min(settings.snippet_chars, TEXT_LIMIT),
        frozenset(set(HIT_DEFAULT_FIELDS) - carried),
    )


def hit_views(hits: list[SearchHit], shape: HitShape, query_terms: list[str], fts_config: str) -> list[dict[str, Any]]:
    """The hits as a reply shows them, each text a window on its best match."""
    stem = stemmer_for(fts_config)
    wanted = set(query_terms)
    found = [occurrences(h.text, wanted, stem) for h in hits]
    weights = term_weights(found)
    length = shape.snippet_chars
    return [hit_view(h, shape, window(h.text, f, weights, length)) for h, f in zip(hits, found, strict=True)]


def focus_chunk(hit: SearchHit, offset: int) -> tuple[Any, int]:
    """(chunk id, chunk index) of the passage's chunk holding document offset `offset` (the best-scored
    chunk when it is one of them)."""
    ids = hit.chunk_ids or [hit.chunk_id]
    spans = hit.chunk_spans or [(hit.char_start, hit.char_end, hit.chunk_index)]
    holding = [(cid, index) for cid, (start, end, index) in zip(ids, spans, strict=False) if start <= offset < end]
    for cid, index in holding:
        if cid == hit.chunk_id:
            return cid, index
    if holding:
        return holding[0]
    best = dict(zip(ids, spans, strict=False)).get(hit.chunk_id)
    return hit.chunk_id, best[2] if best else hit.chunk_index


def hit_view(hit: SearchHit, shape: HitShape, shown: Window) -> dict[str, Any]:
    title, title_cut = cut(hit.document_title, TITLE_LIMIT)
    chunk_id, chunk_index = focus_chunk(hit, hit.char_start + shown.focus)
    view: dict[str, Any] = {
        "chunk_id": chunk_id,
        "document_id": hit.document_id,
        "document_title": title,
        "text": hit.text[shown.start : shown.end],
        "score": round(hit.score, 4),
        "match_type": hit.match_type,
        "metadata": {"source_id": hit.source_id, "chunk_index": chunk_index, "url": hit.url},
        "char_start": hit.char_start + shown.start,
        "char_end": hit.char_start + shown.end,
        "truncated": title_cut or shown.start > 0 or shown.end < len(hit.text),
        **page_number_field(hit.page_start, hit.page_end),
        **code_fields(hit, shown),
    }
    if "line_start" in view:
        view["metadata"]["url"] = line_link(hit, view["line_start"])
    if hit.version is not None:
        view["version"] = hit.version
    if hit.flags:  # injection flags (services/flags); absent = none found
        view["flags"] = hit.flags
    for name in shape.left_out:  # defaults a profile's output settings leave out
        for key in DEFAULT_KEYS.get(name, (name,)):
            view.pop(key, None)
    view.update(optional_fields(hit, shape.fields))
    return view


def code_fields(hit: SearchHit, shown: Window) -> dict[str, Any]:
    """Where a code result is: its file's path, its first and last line (1-based), the commit."""
    if hit.document_type != "code" or hit.lines_before is None:
        return {}
    meta = hit.document_metadata
    path = meta.get("path") or meta.get("folder_path") or hit.document_title
    first = hit.lines_before + hit.text.count("\n", 0, shown.start) + 1
    last = first + hit.text[shown.start : shown.end].rstrip("\n").count("\n")
    out: dict[str, Any] = {"path": str(path)[:TITLE_LIMIT], "line_start": first, "line_end": last}
    if isinstance(meta.get("commit"), str):
        out["commit"] = meta["commit"]
    return out


def line_link(hit: SearchHit, line: int) -> str | None:
    """A git file's browse URL pointing at the line (`#L12`, as GitHub, GitLab and Gitea read it)."""
    url = hit.url
    if not url or "commit" not in hit.document_metadata or "#" in url:
        return url
    if urlsplit(url).scheme not in ("http", "https"):
        return url
    return f"{url}#L{line}"


def optional_fields(hit: SearchHit, names: frozenset[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "heading_path" in names:
        out["heading_path"] = hit.heading_path
    if "similarity" in names:
        out["similarity"] = round(hit.similarity, 4)
    if "chunk_ids" in names:
        out["chunk_ids"] = hit.chunk_ids or [hit.chunk_id]
        out["chunk_index_end"] = hit.chunk_index_end if hit.chunk_index_end is not None else hit.chunk_index
    if "uri" in names:
        out["uri"] = document_uri(hit.document_id)
    if "source_title" in names:
        out["source_title"] = cut(hit.source_title, TITLE_LIMIT)[0]
    if "document_metadata" in names:
        out["document_metadata"] = metadata_view(hit.document_metadata)[0]
    if "freshness" in names:
        out.update(hit.freshness)
    return out
