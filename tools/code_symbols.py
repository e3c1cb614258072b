"""search_type="definition" / "references" of search_knowledge_base, and manage_document's code outline:
the request from the tool's arguments, the reply's hits (services/code/symbol_search.py).

A definition hit has `path`, `line_start`/`line_end` spanning the definition, `symbol` (name, kind,
qualified_name, signature, parent) and `text` (the signature and the start of its docstring); a name
documented by an API reference page has the page's `url` with its anchor instead of lines. A reference
hit is one line where the name is used (definitions excluded): `path`, `line`, the line's `text`.
"""

from __future__ import annotations

from typing import Any

from models.search import SearchQuery
from services.app import Runtime
from services.code.symbol_search import Page, ReferenceHit, SymbolHit
from services.core.errors import InvalidArgument
from services.core.validation import MAX_PER_PAGE
from services.sources.versions import served_note
from tools.code_search import governed
from tools.common import TEXT_LIMIT, call_time_limit, cut, document_uri

NAME = "search_knowledge_base"
SYMBOL_TYPES = ("definition", "references")
#: ranked-search arguments a symbol search does not take
NOT_SYMBOL = ("similarity_threshold", "max_tokens", "answer", "keyword_weight", "fields", "keyword_mode", "hybrid_mode")


def check_arguments(args: Any) -> None:
    if args.offset is not None and args.search_type not in (*SYMBOL_TYPES, "grep"):
        raise InvalidArgument("offset pages definition and references only.", "Leave it out.")
    if args.search_type in SYMBOL_TYPES:
        given = [name for name in NOT_SYMBOL if getattr(args, name) not in (None, False, [])]
        if given:
            raise InvalidArgument(
                f"search_type='{args.search_type}' does not take {', '.join(given)}.",
                "Leave them out, or use another search_type.",
            )


def _where(hit: SymbolHit | ReferenceHit) -> dict[str, Any]:
    view: dict[str, Any] = {
        "path": hit.path,
        "source_id": str(hit.source_id),
        "document_id": str(hit.document_id),
        "uri": document_uri(hit.document_id),
    }
    if hit.commit:
        view["commit"] = hit.commit
    if hit.version:
        view["version"] = hit.version
    return view


def definition_view(hit: SymbolHit) -> dict[str, Any]:
    symbol = {"name": hit.name, "kind": hit.kind, "qualified_name": hit.qualified_name, "signature": hit.signature}
    if hit.parent:
        symbol["parent"] = hit.parent
    view = {**_where(hit), "symbol": symbol, "match_type": "definition"}
    if hit.anchor is not None:  # a name an API reference page documents
        url = f"{hit.url or ''}#{hit.anchor}" if hit.anchor else hit.url
        view.update(url=url, title=cut(hit.title, 200)[0])
        view["text"] = f"{hit.qualified_name} is documented on {hit.title or hit.url}"[:TEXT_LIMIT]
        view["truncated"] = False
        return view
    text, truncated = cut("\n".join(p for p in (hit.signature, hit.doc) if p), TEXT_LIMIT)
    view.update(line_start=hit.line_start, line_end=hit.line_end, text=text, truncated=truncated)
    return view


def reference_view(hit: ReferenceHit) -> dict[str, Any]:
    text, truncated = cut(hit.text, TEXT_LIMIT)
    return {
        **_where(hit),
        "line": hit.line,
        "line_start": hit.line,
        "line_end": hit.line,
        "text": text,
        "truncated": truncated,
        "match_type": "reference",
    }


def page_payload(page: Page, kind: str, query: str) -> dict[str, Any]:
    view = definition_view if kind == "definition" else reference_view
    results = [view(h) for h in page.hits]
    payload: dict[str, Any] = {
        "results": results,
        "count": len(results),
        "search_type": kind,
        "query": query,
        "total_matches": page.total,
        "offset": page.offset,
    }
    if page.next_offset is not None:
        payload["next_offset"] = page.next_offset
    if page.notes:
        payload["note"] = " ".join(page.notes)
    if not results:
        payload["hint"] = "Symbols come from synced code files; try grep, or a bare name."
    return payload


async def symbol_search(runtime: Runtime, args: Any) -> dict[str, Any]:
    """One definition or references search as the chosen profile, within the call's time limit."""
    limit = MAX_PER_PAGE if args.match_count is None else args.match_count
    if not 1 <= limit <= MAX_PER_PAGE:
        raise InvalidArgument(f"match_count must be 1 to {MAX_PER_PAGE} (got {limit}).", "Leave it out.")
    offset = getattr(args, "offset", None) or 0
    if offset < 0:
        raise InvalidArgument(f"offset must be 0 or more (got {offset}).", "Use the next_offset of a reply.")
    app = await runtime.get()
    query = SearchQuery(
        query=args.query,
        source_id=args.source_id,
        source_ids=args.source_ids,
        profile=args.profile,
        library=args.library,
        version=args.version,
    )
    async with app.queries.within(query) as target, call_time_limit(app, NAME), app.db.reading():
        find = app.symbols.definitions if args.search_type == "definition" else app.symbols.references
        page = await find(args.query, target.source_ids, offset, limit)
        payload = page_payload(page, args.search_type, args.query)
        governed(payload)  # the reading policy, as for grep lines
    served, chosen = target.served, target.profile
    if served is not None:
        payload.update(library=served.library, version=served.version, source_id=str(served.source_id))
        payload["requested_version"] = served.requested
        if note := served_note(served):
            payload["version_note"] = note
    if chosen is not None:
        payload["profile"] = chosen.name
    return payload


def outline_view(outline: dict[str, Any], page: int) -> dict[str, Any]:
    """One page of a code file's symbols, in file order."""
    if page < 1:
        raise InvalidArgument(f"page must be 1 or more (got {page}).", "Use page=1 for the first outline page.")
    symbols = outline["symbols"]
    chosen = symbols[(page - 1) * MAX_PER_PAGE : page * MAX_PER_PAGE]
    view: dict[str, Any] = {
        "language": outline["language"],
        "symbols": [{k: v for k, v in s.items() if v is not None} for s in chosen],
        "total_count": len(symbols),
        "page": page,
        "has_more": page * MAX_PER_PAGE < len(symbols),
    }
    if outline["capped"]:
        view["capped"] = outline["capped"]
        view["note"] = f"Symbols of this file were capped by the parse budget ({outline['capped']})."
    return view
