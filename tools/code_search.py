"""search_type="grep" of search_knowledge_base: the request from the tool's arguments, the reply's hits.

Every matching line in path then line order (services/code/grep.py), each hit with `path`, `line` (the
match), `line_start`/`line_end` (the lines `text` holds: the match with `context_lines` around it, at
most TEXT_LIMIT characters, the matching line always kept), `commit` (git) and `version`.
"""

from __future__ import annotations

from typing import Any

from models.search import SearchQuery
from services.app import Runtime
from services.code.grep import GrepHit, GrepOutcome, GrepRequest
from services.core.errors import InvalidArgument
from services.core.validation import MAX_PER_PAGE
from services.flags.reading import unstored_views
from services.sources.versions import served_note
from tools.common import TEXT_LIMIT, call_time_limit, document_uri

NAME = "search_knowledge_base"
#: arguments only grep takes, and arguments grep does not take
GREP_ONLY = ("literal", "case_sensitive", "path", "context_lines", "offset")
NOT_GREP = (
    "similarity_threshold", "max_tokens", "answer", "keyword_weight", "fields", "keyword_mode", "hybrid_mode",
)  # fmt: skip
GREP_HINT = "Read more of a file: manage_document(action='get', source_id=..., path=..., line_start=...)."


def check_arguments(args: Any) -> None:
    """grep's own arguments only with grep, and none of the ranked searches' with it."""
    if args.search_type == "grep":
        given = [name for name in NOT_GREP if getattr(args, name) not in (None, False, [])]
        if given:
            raise InvalidArgument(
                f"search_type='grep' does not take {', '.join(given)}.", "Leave them out, or use another search_type."
            )
        return
    pages = args.search_type in ("definition", "references")  # they page with offset too (tools/code_symbols.py)
    given = [name for name in GREP_ONLY if getattr(args, name) is not None and not (pages and name == "offset")]
    if given:
        raise InvalidArgument(
            f"{', '.join(given)} apply to search_type='grep' only.", "Pass search_type='grep', or leave them out."
        )


def grep_request(args: Any) -> GrepRequest:
    limit = MAX_PER_PAGE if args.match_count is None else args.match_count
    if not 1 <= limit <= MAX_PER_PAGE:
        raise InvalidArgument(f"match_count must be 1 to {MAX_PER_PAGE} for grep (got {limit}).", "Leave it out.")
    return GrepRequest(
        pattern=args.query,
        literal=bool(args.literal),
        case_sensitive=args.case_sensitive is not False,
        path=args.path,
        context_lines=2 if args.context_lines is None else args.context_lines,
        offset=args.offset or 0,
        limit=limit,
    )


def hit_text(hit: GrepHit, limit: int = TEXT_LIMIT) -> tuple[str, int, int, bool]:
    """(text, line_start, line_end, truncated): the matching line (a window of it when long) and as many
    context lines around it as fit in `limit` characters, nearest first."""
    centre, cut = hit.piece, False
    if len(centre) > limit:
        start = max(0, min(hit.start - limit // 4, len(centre) - limit))
        centre, cut = centre[start : start + limit], True
    before = [t for n, t in hit.around if n < hit.line][::-1]
    after = [t for n, t in hit.around if n > hit.line]
    above: list[str] = []
    below: list[str] = []
    size = len(centre)
    while len(above) < len(before) or len(below) < len(after):
        grew = False
        for side, source in ((below, after), (above, before)):
            if len(side) < len(source) and size + len(source[len(side)]) + 1 <= limit:
                size += len(source[len(side)]) + 1
                side.append(source[len(side)])
                grew = True
        if not grew:
            cut = True
            break
    lines = above[::-1] + [centre] + below
    return "\n".join(lines), hit.line - len(above), hit.line + len(below), cut


def hit_view(hit: GrepHit) -> dict[str, Any]:
    text, line_start, line_end, truncated = hit_text(hit)
    view: dict[str, Any] = {
        "path": hit.path,
        "line": hit.line,
        "line_start": line_start,
        "line_end": line_end,
        "text": text,
        "truncated": truncated,
        "source_id": str(hit.source_id),
        "document_id": str(hit.document_id),
        "uri": document_uri(hit.document_id),
        "match_type": "grep",
    }
    if hit.commit:
        view["commit"] = hit.commit
    if hit.version:
        view["version"] = hit.version
    return view


def governed(payload: dict[str, Any]) -> None:
    """Lines of stored files leave through the one reading policy (services/flags/reading.py): scanned as
    they are returned, their flags attached, withheld under a scope that leaves flagged text out."""
    payload["results"], note = unstored_views(payload["results"], ["text"])
    payload.update(note)


def grep_payload(outcome: GrepOutcome, request: GrepRequest) -> dict[str, Any]:
    results = [hit_view(h) for h in outcome.hits]
    payload: dict[str, Any] = {"results": results, "count": len(results), "search_type": "grep"}
    payload["total_matches" if outcome.exact else "total_matches_at_least"] = outcome.total
    payload["offset"] = request.offset
    if outcome.next_offset is not None:
        payload["next_offset"] = outcome.next_offset
    if outcome.scanned:
        payload["scanned"] = True
        payload["note"] = (
            "The pattern has no literal of 3+ letters or digits the index can use: every line of the "
            "sources was read (slower; bounded in time)."
        )
    if results:
        payload["hint"] = GREP_HINT
    return payload


async def grep(runtime: Runtime, args: Any) -> dict[str, Any]:
    """One grep as the chosen profile (services/search/query.py picks the sources), within the call's time limit."""
    request = grep_request(args)
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
        outcome = await app.code.grep(request, target.source_ids)
        await app.code.fill(outcome.hits, request.context_lines)
        payload = grep_payload(outcome, request)
        governed(payload)  # the reading policy: flags attached, flagged lines withheld as the scope says
    payload["query"] = args.query
    served = target.served
    if served is not None:
        payload.update(library=served.library, version=served.version, source_id=str(served.source_id))
        payload["requested_version"] = served.requested
        if note := served_note(served):
            payload["version_note"] = note
    if target.profile is not None:
        payload["profile"] = target.profile.name
    return payload
