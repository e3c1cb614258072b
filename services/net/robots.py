"""robots.txt and llms.txt: parsing (services/net/text_fetch.py fetches them; sitemaps: sitemap.py).

`RobotsPolicy` follows RFC 9309 as Google implements it: the most specific user-agent group wins
(groups naming the same agent are merged), the longest matching rule wins, Allow wins a tie, `*` and
a trailing `$` are supported in paths. urllib.robotparser is not used because it takes the first
matching rule rather than the longest and knows no wildcards. Parsing stays within the "robots" and
"llms" budgets (services/core/budgets.py): the first 512 KiB of a robots.txt are read (RFC 9309 asks for at
least 500 KiB) and at most 10,000 rules kept, since every URL of a crawl is matched against them; an
llms.txt yields at most its budget of links.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from services.core.budgets import budget
from services.net.urls import normalize_url
from services.net.wildcard import Wildcard

logger = logging.getLogger(__name__)

#: A markdown link `[label](<url> "title")` in three linear pieces (see `markdown_link_targets`).
_LINK_LABEL = re.compile(r"\[[^\[\]]*\]\(\s*<?")
_LINK_TARGET = re.compile(r"[^)\s>]+")
_LINK_CLOSE = re.compile(r"(?<!\s)>?(?:\s+\"[^\"]*\")?\s*\)")


@dataclass
class _Rule:
    """One Allow/Disallow line, matched against "path?query" (services.net.wildcard, no regex)."""

    allow: bool
    pattern: str
    wildcard: Wildcard = field(init=False)

    def __post_init__(self) -> None:
        self.wildcard = Wildcard.compile(self.pattern)

    def matches(self, path: str) -> bool:
        return self.wildcard.matches(path)


@dataclass
class _Group:
    """A group of records sharing the same user-agent lines."""

    agents: list[str] = field(default_factory=list)
    rules: list[_Rule] = field(default_factory=list)
    crawl_delay: float | None = None


def _product_token(user_agent: str) -> str:
    """The lower-cased product token of a user agent: ArchivistBot/0.1 (+https://...) -> archivistbot."""
    return re.split(r"[/\s]", user_agent.strip(), maxsplit=1)[0].lower()


def _parse_line(raw_line: str) -> tuple[str, str] | None:
    """Split a line into (lower-cased key, value), dropping comments; None for blank or malformed lines."""
    line = raw_line.split("#", 1)[0].strip()
    if ":" not in line:
        return None
    key, value = line.split(":", 1)
    return key.strip().lower(), value.strip()


def _add_record(group: _Group, key: str, value: str) -> bool:
    """Apply one Allow/Disallow/Crawl-delay line to its group (other keys are ignored); True when a
    rule was added."""
    if key in ("allow", "disallow"):
        if value:  # "Disallow:" with no path allows everything: no rule needed.
            group.rules.append(_Rule(allow=key == "allow", pattern=value))
            return True
    elif key == "crawl-delay":
        try:
            group.crawl_delay = max(0.0, float(value))
        except ValueError:
            logger.debug("ignoring bad Crawl-delay %r", value)
    return False


def _parse_groups(text: str) -> tuple[list[_Group], list[str], bool]:
    """Split robots.txt into user-agent groups and collect Sitemap lines; True when the budget cut it.

    Consecutive User-agent lines share one group; a User-agent line after a record starts a new one.
    """
    limits = budget("robots")
    cut = len(text) > limits.input_limit()
    text = text[: limits.input_limit()]
    rules = 0
    groups: list[_Group] = []
    sitemaps: list[str] = []
    current: _Group | None = None
    group_has_records = False
    for raw_line in text.splitlines():
        parsed = _parse_line(raw_line)
        if parsed is None:
            continue
        key, value = parsed
        if key == "sitemap":
            if value:
                sitemaps.append(value)
        elif key == "user-agent":
            if current is None or group_has_records:
                current = _Group()
                groups.append(current)
                group_has_records = False
            current.agents.append(value.lower())
        elif current is not None:
            group_has_records = True
            if rules < limits.structure or key not in ("allow", "disallow"):
                rules += _add_record(current, key, value)
            else:
                cut = True
    return groups, sitemaps, cut


def _select_groups(groups: list[_Group], user_agent: str) -> list[_Group]:
    """Groups naming our product token (merged), else the `*` groups."""
    token = _product_token(user_agent)
    specific = [g for g in groups if any(a != "*" and _product_token(a) == token for a in g.agents)]
    if specific:
        return specific
    return [g for g in groups if "*" in g.agents]


class RobotsPolicy:
    """What one site's robots.txt lets a given user agent do."""

    def __init__(self, text: str, user_agent: str) -> None:
        groups, self._sitemaps, self.cut = _parse_groups(text.lstrip("\ufeff"))
        selected = _select_groups(groups, user_agent)
        self._rules = [rule for group in selected for rule in group.rules]
        delays = [g.crawl_delay for g in selected if g.crawl_delay is not None]
        self._crawl_delay = max(delays) if delays else None
        self._disallow_all = False

    @classmethod
    def allow_all(cls) -> RobotsPolicy:
        """The policy for a site without robots.txt (4xx)."""
        return cls("", "*")

    @classmethod
    def disallow_all(cls) -> RobotsPolicy:
        """The policy while robots.txt is unreachable (5xx, network error)."""
        policy = cls("", "*")
        policy._disallow_all = True
        return policy

    @classmethod
    def from_response(cls, status: int, text: str, user_agent: str) -> RobotsPolicy:
        """RFC 9309: 2xx -> parse, 4xx -> allow all, 5xx or no response (status 0) -> disallow all."""
        if 200 <= status < 300:
            return cls(text, user_agent)
        if 400 <= status < 500:
            return cls.allow_all()
        return cls.disallow_all()

    @property
    def crawl_delay(self) -> float | None:
        """Crawl-delay in seconds for our user agent, if the site sets one."""
        return self._crawl_delay

    @property
    def sitemaps(self) -> list[str]:
        """Sitemap URLs listed anywhere in the file."""
        return list(self._sitemaps)

    def can_fetch(self, url: str) -> bool:
        """Whether our user agent may fetch `url` (robots.txt itself is always allowed)."""
        if self._disallow_all:
            return False
        parts = urlsplit(url)
        path = parts.path or "/"
        if path == "/robots.txt":
            return True
        target = unquote(f"{path}?{parts.query}" if parts.query else path)
        best: _Rule | None = None
        for rule in self._rules:
            if not rule.matches(target):
                continue
            if best is None or (len(rule.pattern), rule.allow) > (len(best.pattern), best.allow):
                best = rule
        return best is None or best.allow


def markdown_link_targets(text: str) -> Iterator[str]:
    """The targets of the markdown links `[label](url "title")` in `text`, in linear time.

    One regex would rescan the rest of the text from every `[` of "[a](" * 10,000 (12 s). A target
    runs to the first `)`, `>` or blank whatever `[` it starts from, so a run found not to close a
    link is remembered and not scanned again from a later `[` inside it.
    """
    position, dead_end = 0, -1
    while (label := _LINK_LABEL.search(text, position)) is not None:
        position = label.start() + 1
        if label.end() < dead_end:
            continue
        target = _LINK_TARGET.match(text, label.end())
        if target is None:
            continue
        close = _LINK_CLOSE.match(text, target.end())
        if close is None:
            dead_end = target.end()
            continue
        yield target.group()
        position = close.end()


def parse_llms_txt(text: str, base_url: str) -> list[str]:
    """Absolute, normalised, de-duplicated http(s) URLs of the markdown links in an llms.txt file (or a
    markdown page): the first ones, up to the "llms" budget's count."""
    limits = budget("llms")
    seen: dict[str, None] = {}
    for target in markdown_link_targets(text):
        url = normalize_url(target, base=base_url)
        if url:
            seen.setdefault(url, None)
            if len(seen) >= limits.structure:
                break
    return list(seen)
