"""What a profile may hold, checked in one place for every door (the command line, the console, the
services): its name, description, search defaults and output settings. The console's form is drawn
from these constants (its name pattern, choices and ranges) and posts to the same check, so a form
and the service never disagree on what is accepted.

Output settings say how the hits of a caller searching as a profile are shaped: how long a hit's
text may be (`snippet_chars`) and which fields a hit carries (`hit_fields`; a hit always carries
HIT_CORE). `output_settings_of` combines a caller's profiles; the search tool's hit shaper applies them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from models import SEARCH_TYPES
from services.core.errors import InvalidArgument

#: a profile name: a slug (sql/005_access.sql checks the same); `\-`, so browsers' `pattern` reads it too
# A letter first (as the profiles design says): a name is also an ARCHIVIST_PROFILES entry and a tool argument.
NAME_PATTERN = r"[a-z][a-z0-9_\-]{0,62}"
NAME_RE = re.compile(rf"^{NAME_PATTERN}$")
MAX_DESCRIPTION = 1000
MATCH_COUNT = (1, 20)
SNIPPET_CHARS = (50, 1000)
#: what every hit carries, whatever a profile selects: enough to cite it and read on, and its flags
HIT_CORE = ("chunk_id", "document_id", "text", "truncated", "flags")
#: what a hit carries by default (tools/hits.py; `path` stands for a code hit's path, lines and commit)
HIT_DEFAULT_FIELDS = (
    "document_title",
    "score",
    "match_type",
    "metadata",
    "char_start",
    "char_end",
    "page_number",
    "path",
    "version",
)
#: what a hit carries on request: the search's `fields=`, or a profile's selection
HIT_OPTIONAL_FIELDS = (
    "heading_path",
    "similarity",
    "chunk_ids",
    "uri",
    "source_title",
    "document_metadata",
    "freshness",
)
#: the fields a profile may select for its hits (beside HIT_CORE)
HIT_FIELDS = HIT_DEFAULT_FIELDS + HIT_OPTIONAL_FIELDS


@dataclass(frozen=True)
class OutputSettings:
    """How a caller's hits are shaped: text windows of `snippet_chars`; `fields` None = HIT_CORE and
    HIT_DEFAULT_FIELDS, else HIT_CORE and these (defaults left out, optional ones added)."""

    snippet_chars: int = SNIPPET_CHARS[1]
    fields: tuple[str, ...] | None = None

    def carried(self) -> tuple[str, ...]:
        """The selectable fields a hit carries under these settings."""
        return HIT_DEFAULT_FIELDS if self.fields is None else self.fields


def output_settings_of(profiles: Iterable[Any]) -> OutputSettings:
    """The output settings of a caller with these profiles: the shortest snippet any of them sets, and
    the fields any of them carries (a profile without a selection carries the defaults)."""
    profiles = list(profiles)
    snippets = [p.snippet_chars for p in profiles if getattr(p, "snippet_chars", None)]
    selections = [getattr(p, "hit_fields", None) for p in profiles]
    fields: tuple[str, ...] | None = None
    if any(s is not None for s in selections):
        chosen = {f for s in selections for f in (HIT_DEFAULT_FIELDS if s is None else s)}
        fields = tuple(f for f in HIT_FIELDS if f in chosen)
    return OutputSettings(min(snippets) if snippets else SNIPPET_CHARS[1], fields)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InvalidArgument(
            f"Invalid profile name {str(name)[:100]!r}.",
            "Use a slug that starts with a letter: lowercase letters, digits, '-' or '_' (max 63), e.g. team-docs.",
        )
    return name


def check_description(value: Any) -> str:
    """Up to MAX_DESCRIPTION characters (what agents read in the search tool); empty = none."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument("description must be text.", "Describe what the profile is for, in a sentence.")
    text = value.strip()
    if len(text) > MAX_DESCRIPTION:
        raise InvalidArgument(
            f"description is {len(text):,} characters, over the {MAX_DESCRIPTION:,}-character limit.",
            "Shorten it: agents read it in the search tool's description.",
        )
    return text


def _number(value: Any, name: str, low: float, high: float, kind: type) -> Any:
    """None (unset) for None or blank; else a number of `kind` within [low, high]."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
        if kind is int and not number.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise InvalidArgument(
            f"{name} must be a number (got {str(value)[:40]!r}).", f"Use {low:g} to {high:g}."
        ) from None
    if not math.isfinite(number) or not low <= number <= high:
        raise InvalidArgument(
            f"{name} must be {low:g} to {high:g} (got {value}).", f"Use a value in [{low:g}, {high:g}]."
        )
    return kind(number)


def check_hit_fields(value: Any) -> list[str] | None:
    """None = the default fields; else a list of HIT_FIELDS names, `all` for every one (HIT_CORE names are
    always kept anyway)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidArgument("hit_fields must be a list of field names.", f"Use some of: {', '.join(HIT_FIELDS)}.")
    if "all" in value:
        return list(HIT_FIELDS)
    unknown = [str(f)[:40] for f in value if f not in HIT_FIELDS and f not in HIT_CORE]
    if unknown:
        raise InvalidArgument(f"Unknown hit field(s): {', '.join(unknown)}.", f"Use some of: {', '.join(HIT_FIELDS)}.")
    return [f for f in dict.fromkeys(value) if f in HIT_FIELDS]


def check_values(fields: dict[str, Any]) -> dict[str, Any]:
    """A checked copy of profile fields (the ones present), values normalised: blank numbers are unset."""
    out = dict(fields)
    if "description" in out:
        out["description"] = check_description(out["description"])
    if "search_type" in out:
        out["search_type"] = out["search_type"] or None
        if out["search_type"] is not None and out["search_type"] not in SEARCH_TYPES:
            raise InvalidArgument(
                f"Invalid search_type '{str(out['search_type'])[:40]}'.", f"Use one of: {', '.join(SEARCH_TYPES)}."
            )
    numbers = {
        "match_count": (*MATCH_COUNT, int),
        "similarity_threshold": (0.0, 1.0, float),
        "keyword_weight": (0.0, 1.0, float),
        "snippet_chars": (*SNIPPET_CHARS, int),
    }
    for key, (low, high, kind) in numbers.items():
        if key in out:
            out[key] = _number(out[key], key, low, high, kind)
    if "hit_fields" in out:
        out["hit_fields"] = check_hit_fields(out["hit_fields"])
    for key in ("read_only", "enabled", "exclude_flagged"):
        if key in out and not isinstance(out[key], bool):
            raise InvalidArgument(f"{key} must be true or false.", f"Pass {key}=true or {key}=false.")
    return out


def check_fields(names: Iterable[str] | None) -> frozenset[str]:
    """The optional hit fields named (a search's `fields=`; `all` is every one); unknown names refused."""
    wanted = {str(n).strip() for n in names or []}
    if "all" in wanted:
        return frozenset(HIT_OPTIONAL_FIELDS)
    unknown = sorted(wanted - set(HIT_OPTIONAL_FIELDS))
    if unknown:
        raise InvalidArgument(
            f"Unknown fields: {', '.join(unknown)[:200]}.",
            f"Use fields= any of: {', '.join(HIT_OPTIONAL_FIELDS)}, all.",
        )
    return frozenset(wanted)
