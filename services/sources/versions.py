"""Versioned documentation: pick the source of a library at the version an agent asked for.

Several sources may share a title (the library) with different `version`s. A request names the library
and an exact version ("3.11", "2.1.0"), a range ("3.x", "3.*", ">=2.1", "~=2.1", ">=1,<2"), "latest",
or nothing (the newest). Ranges resolve to the highest matching version. When nothing matches, the
error lists the versions that exist: never an answer from another version. Only the caller's sources
count, and two of them with the same title, version and url (two tenants' sources in one profile) answer
CONFLICT asking for the source id (services/sources/titles.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from services.access.scope import current_scope
from services.core.database import Database
from services.core.errors import InvalidArgument, NotFound
from services.sources.titles import ambiguous, twins

WILDCARD = re.compile(r"^v?(\d+(?:\.\d+)*)\.(?:x|\*)$", re.IGNORECASE)
OPERATORS = ("==", "!=", ">=", "<=", ">", "<", "~=")
SHOWN_VERSIONS = 20


@dataclass(frozen=True)
class ResolvedVersion:
    """The source serving a library at a version; `requested` is what the agent asked for."""

    source_id: UUID
    library: str
    version: str | None
    requested: str | None


def served_note(resolved: ResolvedVersion) -> str | None:
    """Why the version searched is not, word for word, the one asked for (None when it is)."""
    asked = (resolved.requested or "").strip()
    served = resolved.version if resolved.version is not None else "(unversioned)"
    if not asked or asked.lower() == "latest":
        return f"No version asked for: the newest, {served}, was searched."
    if asked == resolved.version:
        return None
    if version_range(asked) is not None:
        return f"'{asked[:100]}' is a range: its highest version here, {served}, was searched."
    return f"'{asked[:100]}' is version {served} here (the same version, written differently)."


def parse_version(label: str | None) -> Version | None:
    """A PEP 440 version for a stored label ('v2.1' and '2.1.0' parse; 'nightly' does not)."""
    if not label:
        return None
    try:
        return Version(label.strip().removeprefix("v").removeprefix("V"))
    except InvalidVersion:
        return None


def tag_version(ref: str | None) -> str | None:
    """The version a git ref names, when it is a release tag ('v0.28.1', 'refs/tags/3.12.0'): a source
    synced at it is that version of its library, so two tags of one repository, synced under one title,
    are two versions that `library` + `version` choose between. None for a branch or HEAD."""
    label = (ref or "").strip().removeprefix("refs/tags/")
    return label if label and "/" not in label and parse_version(label) is not None else None


def version_range(requested: str) -> SpecifierSet | None:
    """The specifier a range request stands for ('3.x' -> '==3.*'); None for an exact version."""
    text = requested.strip()
    wildcard = WILDCARD.match(text)
    if wildcard:
        return SpecifierSet(f"=={wildcard.group(1)}.*")
    if text.startswith(OPERATORS):
        try:
            return SpecifierSet(text.replace(" ", ""))
        except InvalidSpecifier:
            raise InvalidArgument(
                f"Invalid version range '{requested[:100]}'.", "Use e.g. '3.11', '3.x', '>=2.1' or '>=1,<2'."
            ) from None
    return None


def sort_key(label: str | None) -> tuple[int, Version | str]:
    parsed = parse_version(label)
    return (1, parsed) if parsed is not None else (0, label or "")


def pick(labels: list[str | None], requested: str | None) -> str | None | Literal[False]:
    """The best stored label for the request; False when none fits."""
    ordered = sorted(labels, key=sort_key, reverse=True)
    if requested is None or not requested.strip() or requested.strip().lower() == "latest":
        return ordered[0]
    spec = version_range(requested)
    if spec is not None:
        matching = [v for v in ordered if (p := parse_version(v)) is not None and spec.contains(p, prereleases=True)]
        return matching[0] if matching else False
    wanted = parse_version(requested)
    for label in ordered:
        if label is not None and label.strip().lower() == requested.strip().lower():
            return label
        if wanted is not None and parse_version(label) == wanted:
            return label
    return False


def shown(labels: list[str | None]) -> str:
    ordered = sorted(labels, key=sort_key, reverse=True)
    text = ", ".join(v if v is not None else "(unversioned)" for v in ordered[:SHOWN_VERSIONS])
    return text + (f" and {len(ordered) - SHOWN_VERSIONS} more" if len(ordered) > SHOWN_VERSIONS else "")


async def resolve(db: Database, library: str | None, version: str | None) -> ResolvedVersion:
    """The source of `library` (a source title, any case) at `version` among the caller's sources;
    NotFound lists the versions the caller may see, and a library outside its scope reads as missing."""
    if not library or not library.strip():
        raise InvalidArgument(
            "version needs library (the source title) or source_id.",
            "Pass library='Django' with version='5.x', or list titles with manage_source(action='list').",
        )
    ids = current_scope().source_ids  # other tenants' libraries and versions do not exist here
    rows = await db.pool.fetch(
        "SELECT id, title, version, url FROM sources WHERE lower(title) = lower($1) "
        "AND ($2::uuid[] IS NULL OR id = ANY($2)) ORDER BY created_at, id",
        library.strip(),
        None if ids is None else list(ids),
    )
    if not rows:
        raise NotFound(
            f"No source is titled '{library.strip()[:200]}'.",
            "Find library titles with manage_source(action='list', title='part of the name').",
        )
    by_label: dict[str | None, Any] = {}
    for r in rows:  # the oldest source wins for a repeated label
        by_label.setdefault(r["version"], r)
    labels = list(by_label)
    chosen = pick(labels, version)
    if chosen is False:
        available = shown(labels)
        raise NotFound(
            f"Version '{(version or '').strip()[:100]}' of '{rows[0]['title']}' is not in the knowledge base. "
            f"Available versions: {available}.",
            "Search one of the available versions, or omit version for the newest.",
        )
    row = by_label[chosen]
    same = twins(rows, row)
    if len(same) > 1:
        raise ambiguous(library.strip(), same)
    return ResolvedVersion(row["id"], row["title"], row["version"], version)
