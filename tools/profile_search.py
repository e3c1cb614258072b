"""The search tool's description naming the caller's profiles (what `profile=` may be); searching as
one is decided in services/search/query.py."""

from __future__ import annotations

import logging
from typing import Any

from services.access.profiles import read_profile_notes

logger = logging.getLogger(__name__)
NOTE_LIMIT = 160  # characters of each profile's description in the tool description
MAX_NAMED = 12  # profiles named in the description (tools/list stays small)


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
