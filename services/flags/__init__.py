"""Injection flags: chunks that speak to an agent rather than to a reader are marked at ingestion.

A documentation page can carry text meant for the model that reads it, not for the person: text a
person never sees, instructions addressed to assistants, chat-template or tool-call shaped text, a
remote script piped into a shell. Archivist passes every stored passage to agents, so each chunk is
scanned when it is written and carries a short list of flag names (empty: nothing found):

- `hidden_text`: text a person would not see reached the chunk: an inline-hidden HTML element
  (display:none, visibility:hidden, zero size, off-screen, white on white, ...; evidence from the page
  pipeline, services/pages/hidden.py) or raw hidden markup (an HTML comment, a hidden element) left in a
  markdown or text source outside code.
- `invisible_chars`: zero-width, bidirectional-control or Unicode tag characters inside the text.
- `prompt_injection`: imperative phrasing aimed at assistants (rules.PROMPT_INJECTION).
- `system_prompt`: chat-template role tokens or system-prompt markers.
- `tool_call`: text shaped like a tool call an agent would parse.
- `remote_shell`: a shell pipeline that runs a script fetched from a host (`curl ... | sh`).

Chunks stored before flags existed are `unscanned` until the worker scans them (store.py). The scan is
offline and deterministic: fixed, linear-time rules, no model. Flags inform; they never change text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from services.flags.hidden import MARKS_KEY, mark_hits
from services.flags.rules import CODE_FENCE, CODE_SPAN, HIDDEN_RULE, MARKDOWN_ESCAPE, TEXT_RULES

FLAG_NAMES = ("hidden_text", "invisible_chars", "prompt_injection", "system_prompt", "tool_call", "remote_shell")
#: the pseudo-flag of a chunk stored before flags existed and not scanned yet
UNSCANNED = "unscanned"

#: zero-width and joiner characters; counted between two ASCII letters, where they split words (the
#: PostgreSQL manual puts U+200B after `_`, `,` and between hex digit groups as line-break hints)
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\u180e\ufeff")
#: bidirectional embeddings, overrides and isolates ("Trojan source"); marks (U+200E/F) are fine
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: zero-width characters inside words a chunk may hold before it is flagged (a stray one is common)
ZERO_WIDTH_LIMIT = 2
COMMENT_MIN_WORDS = 4


def is_tag_character(char: str) -> bool:
    """Unicode tag characters (U+E0000-E007F) and the variation-selector supplement: invisible carriers
    of ASCII ("ASCII smuggling")."""
    code = ord(char)
    return 0xE0000 <= code <= 0xE007F or 0xE0100 <= code <= 0xE01EF


def ascii_letter(char: str) -> bool:
    return ("a" <= char <= "z") or ("A" <= char <= "Z")


def has_invisible_chars(text: str) -> bool:
    """Tag or bidi-control characters anywhere, or more than ZERO_WIDTH_LIMIT zero-width characters
    between ASCII letters (inside words)."""
    if max(text, default=" ") < "\u180e":  # the common case, at C speed: nothing of the kind
        return False
    inside = 0
    for i, char in enumerate(text):
        if char in ZERO_WIDTH:
            before = text[i - 1] if i else " "
            after = text[i + 1] if i + 1 < len(text) else " "
            if ascii_letter(before) and (ascii_letter(after) or after in ZERO_WIDTH):
                inside += 1
                if inside > ZERO_WIDTH_LIMIT:
                    return True
        elif char in BIDI_CONTROLS or (char >= "\U000e0000" and is_tag_character(char)):
            return True
    return False


def prose_only(text: str) -> str:
    """`text` with fenced code blocks and code spans blanked: code is shown as written, never hidden."""
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        opened = CODE_FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            out.append("")
        elif opened:
            fence = opened.group(1)
            out.append("")
        else:
            out.append(CODE_SPAN.sub("", line))
    return "\n".join(out)


def has_hidden_comment(text: str) -> bool:
    """An HTML comment of at least COMMENT_MIN_WORDS words (`<!-- TOC -->`-style markers are not text)."""
    start = text.find("<!--")
    while start != -1:
        end = text.find("-->", start + 4)
        body = text[start + 4 : end if end != -1 else len(text)]
        if len(body.split()) >= COMMENT_MIN_WORDS:
            return True
        if end == -1:
            return False
        start = text.find("<!--", end + 3)
    return False


def has_hidden_markup(text: str) -> bool:
    if "<" not in text:
        return False
    prose = prose_only(text)
    return has_hidden_comment(prose) or HIDDEN_RULE.search(prose) is not None


def scan_text(text: str, marks: Iterable[str] = ()) -> list[str]:
    """The flags of one chunk's text (in FLAG_NAMES order); `marks` is its document's hidden-text
    evidence from the page pipeline (services/flags/hidden.py)."""
    found = set()
    if mark_hits(text, marks) or has_hidden_markup(text):
        found.add("hidden_text")
    if has_invisible_chars(text):
        found.add("invisible_chars")
    shown = MARKDOWN_ESCAPE.sub(r"\1", text) if "\\" in text else text
    for flag, rule in TEXT_RULES.items():
        if rule.search(shown) is not None:
            found.add(flag)
    return [name for name in FLAG_NAMES if name in found]


#: a chunk's flags as SQL (alias `c`): NULL, stored before flags existed, reads as ["unscanned"]
FLAGS_COLUMN = "coalesce(c.flags, ARRAY['unscanned']::text[]) AS flags"


def merge_flags(lists: Iterable[Sequence[str]]) -> list[str]:
    """The union of several chunks' flags (a merged passage), in FLAG_NAMES order, `unscanned` last."""
    seen = {name for flags in lists for name in flags}
    return [name for name in (*FLAG_NAMES, UNSCANNED) if name in seen]


def document_marks(metadata: dict[str, Any] | None) -> list[str]:
    marks = (metadata or {}).get(MARKS_KEY)
    return [m for m in marks if isinstance(m, str)] if isinstance(marks, list) else []


def chunk_flags(title: str, chunks: Sequence[Any], metadata: dict[str, Any] | None = None) -> list[list[str]]:
    """Flags for each chunk of a document: its text with the heading path, and the title (shown with
    every hit), scanned with the document's hidden-text evidence."""
    marks = document_marks(metadata)
    title_flags = scan_text(title) if title else []
    out = []
    for chunk in chunks:
        headings = " > ".join(chunk.heading_path or [])
        flags = scan_text(f"{headings}\n{chunk.text}" if headings else chunk.text, marks)
        out.append([n for n in FLAG_NAMES if n in flags or n in title_flags])
    return out


__all__ = ["FLAGS_COLUMN", "FLAG_NAMES", "UNSCANNED", "chunk_flags", "document_marks", "merge_flags", "scan_text"]
