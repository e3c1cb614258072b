"""What a line must contain to match a pattern: the trigram prefilter of grep.

RE2 cannot say which literals a match needs, so the pattern is read a second time with Python's own
regex parser (`re._parser`, the old `sre_parse`) and walked for the literals every match contains: a
run of literal characters in sequence, a repeat taken at least once, and a group of alternatives when
each alternative requires one (then any of them). The result is an AND of ORs of literal strings; each
becomes the trigrams a candidate block must hold (services/code/grep.py), and for a case-sensitive
pattern also `text LIKE '%literal%'` on the candidate blocks. It is
conservative by construction: it may require less than the pattern does, never more, so RE2 confirms
every candidate line. A pattern Python's parser does not read (RE2-only syntax), or with no literal of
MIN_LITERAL word characters, gets no prefilter: grep then scans, bounded in time, and says so.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

MIN_LITERAL = 3
MAX_GROUPS = 6  # LIKE conditions AND-ed (the longest literals kept)
MAX_ALTERNATIVES = 8  # literals OR-ed in one condition
#: a literal the trigram index can use: three word characters in a row (pg_trgm's trigrams are words)
WORDY = re.compile(r"[^\W_]{3}")


@dataclass(frozen=True)
class Prefilter:
    """Literal groups every matching line contains (AND of ORs), and whether they ignore case."""

    groups: list[list[str]] = field(default_factory=list)
    ignore_case: bool = False

    @property
    def indexed(self) -> bool:
        return bool(self.groups)


def like_pattern(literal: str) -> str:
    """`%literal%` for LIKE, its wildcards and the escape character escaped."""
    escaped = literal.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def prefilter(pattern: str, literal: bool, case_sensitive: bool) -> Prefilter:
    """The literals a line matching `pattern` must contain (none: the pattern gives no usable trigram)."""
    if literal:
        return Prefilter(useful([[pattern]]), not case_sensitive)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return Prefilter([], not case_sensitive)
    ignore = not case_sensitive or ignores_case(parsed)
    return Prefilter(useful(required(list(parsed))), ignore)


def ignores_case(parsed: Any) -> bool:
    """Whether any part of the pattern matches without case (a global or a group's inline flag)."""
    if parsed.state.flags & sre.SRE_FLAG_IGNORECASE:
        return True
    return _group_flags(list(parsed))


def _group_flags(items: list[Any]) -> bool:
    for op, av in items:
        if op is sre.SUBPATTERN:
            _, add, _, sub = av
            if add & sre.SRE_FLAG_IGNORECASE or _group_flags(list(sub)):
                return True
        elif op is sre.BRANCH and any(_group_flags(list(alt)) for alt in av[1]):
            return True
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT) and _group_flags(list(av[2])):
            return True
        elif op is sre.ATOMIC_GROUP and _group_flags(list(av)):
            return True
    return False


def required(items: list[Any]) -> list[list[str]]:
    """The literal groups a sequence of parsed items requires (AND of ORs)."""
    groups: list[list[str]] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) >= MIN_LITERAL:
            groups.append(["".join(run)])
        run.clear()

    for op, av in items:
        if op is sre.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is sre.SUBPATTERN:
            groups.extend(required(list(av[3])))
        elif op is sre.ATOMIC_GROUP:
            groups.extend(required(list(av)))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT) and av[0] >= 1:
            groups.extend(required(list(av[2])))
        elif op is sre.BRANCH:
            either = alternatives([required(list(alt)) for alt in av[1]])
            if either:
                groups.append(either)
    flush()
    return groups


def alternatives(options: list[list[list[str]]]) -> list[str]:
    """One OR group for a branch: each alternative's strongest requirement; none if any has none."""
    out: list[str] = []
    for groups in options:
        usable = useful(groups)
        if not usable:
            return []
        out.extend(usable[0])
    return list(dict.fromkeys(out)) if len(out) <= MAX_ALTERNATIVES else []


def useful(groups: list[list[str]]) -> list[list[str]]:
    """The groups the trigram index can answer (every alternative wordy), strongest first, capped."""
    kept = [g for g in groups if g and all(WORDY.search(lit) for lit in g)]
    kept.sort(key=lambda g: min(len(lit) for lit in g), reverse=True)
    return kept[:MAX_GROUPS]
