"""Searching as a profile: the `profile` argument of search_knowledge_base, its defaults, and the
search tool's description naming the caller's profiles."""

from __future__ import annotations

import logging
from typing import Any

from models.access import Profile
from services.access.profiles import read_profile_notes
from services.access.scope import Scope, current_scope
from services.core.errors import InvalidArgument

logger = logging.getLogger(__name__)
NOTE_LIMIT = 160  # characters of each profile's description in the tool description
MAX_NAMED = 12  # profiles named in the description (tools/list stays small)
BUILT_IN = {"search_type": "hybrid", "match_count": 10}


async def choose_profile(app: Any, name: str | None) -> tuple[Profile | None, Scope]:
    """The profile a search runs as, and the scope it runs in.

    `name` must be one of the caller's profiles (any enabled profile for an unrestricted caller); the
    scope is then the caller's narrowed to that profile's sources. Without `name`, a caller confined to
    exactly one profile searches with that profile's defaults."""
    scope = current_scope()
    if not name:
        if len(scope.profiles) != 1:
            return None, scope
        name = scope.profiles[0]
    profiles = {p.name: p for p in await app.profiles.list()}
    allowed = [n for n in (scope.profiles or sorted(profiles)) if n in profiles and profiles[n].enabled]
    if name not in allowed:
        raise InvalidArgument(
            f"Unknown or disabled profile '{str(name)[:100]}'.",
            f"Use profile= one of: {', '.join(allowed) or '(none: leave profile out)'}.",
        )
    profile = profiles[name]
    return profile, scope.narrowed(frozenset(profile.source_ids), scope.profiles, profile.exclude_flagged)


async def leaves_out_flagged(app: Any, chosen: Profile | None, scope: Scope) -> bool:
    """Whether this search leaves chunks with injection flags out: decided once, in the scope (any profile
    the caller is confined to, or the profile it searches as, says so: services/access/scope.py), the same
    rule every read door applies (services/flags/reading.py)."""
    return scope.exclude_flagged


def with_defaults(profile: Profile | None, given: dict[str, Any]) -> dict[str, Any]:
    """Arguments the caller left out (None) take the profile's defaults, then the built-in ones."""
    out = dict(given)
    for key in ("search_type", "match_count", "similarity_threshold", "keyword_weight"):
        if out.get(key) is None and profile is not None:
            out[key] = getattr(profile, key)
        if out.get(key) is None and key in BUILT_IN:
            out[key] = BUILT_IN[key]
    return out


async def caller_profiles(runtime: Any, names: list[str], notes: dict[str, str]) -> dict[str, str]:
    """name -> description of the profiles this caller may search as (its token's, else `--profile`:
    the caller is worked out once, by access/guard.caller_of)."""
    if not names:
        return {}
    app = runtime.ready()
    if app is not None:
        try:
            live = {p.name: p.description for p in await app.profiles.list() if p.enabled}
            return {n: live[n] for n in names if n in live}
        except Exception:
            logger.warning("could not list profiles for the tool description", exc_info=True)
    missing = [n for n in names if n not in notes]
    if missing:  # still starting: read them on a connection of their own (and keep them)
        notes.update(await read_profile_notes(runtime.settings, missing))
    return {n: notes[n] for n in names if n in notes}


async def describe_profiles(tools: list[Any], runtime: Any, names: list[str], notes: dict[str, str]) -> list[Any]:
    """The tool list, the search tool's description naming the caller's profiles (a copy per call)."""
    named = await caller_profiles(runtime, names, notes)
    if not named:
        return tools
    parts = []
    for name, description in list(named.items())[:MAX_NAMED]:
        text = " ".join(description.split())
        text = text[: NOTE_LIMIT - 1] + "…" if len(text) > NOTE_LIMIT else text
        parts.append(f"{name} ({text})" if text else name)
    more = f"; +{len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
    note = f"\nProfiles (profile=NAME: its sources and search defaults): {'; '.join(parts)}{more}."
    out = []
    for tool in tools:
        if tool.name == "search_knowledge_base":
            tool = tool.model_copy(update={"description": (tool.description or "") + note})
        out.append(tool)
    return out
