"""Injection flags: chunks that speak to an agent rather than to a reader are marked at ingestion.

A documentation page can carry text meant for the model that reads it, not for the person: text a
person never sees, instructions addressed to assistants, chat-template or tool-call shaped text, a
remote script piped into a shell. Archivist passes every stored passage to agents, so each chunk is
scanned when it is written and carries a short list of flag names (empty: nothing found):

- `hidden_text`: text a person would not see reached the chunk: an inline-hidden HTML element
  (display:none, visibility:hidden, zero size, off-screen, white on white, ...; evidence from the page
  pipeline, services/pages/hidden.py) or raw hidden markup (an HTML comment, a hidden element) left in a
  markdown or text source outside code.
- `invisible_chars`: an invisible (default-ignorable) character inside a word, or bidirectional-control
  or Unicode tag characters anywhere in the text (normal.py).
- `mixed_script`: a word mixing Latin letters with look-alike letters of another script (normal.py).
- `prompt_injection`: imperative phrasing aimed at assistants (rules.PROMPT_INJECTION).
- `system_prompt`: chat-template role tokens or system-prompt markers.
- `tool_call`: text shaped like a tool call an agent would parse.
- `remote_shell`: a shell pipeline that runs a script fetched from a host (`curl ... | sh`).

The text rules read the text as stored and as a reader sees it (normal.py: NFKC, case-folded, invisible
characters removed, confusables mapped to their Latin prototype), so a disguise that only changes the
characters, not what is read, changes nothing. Chunks stored before flags existed are `unscanned` until
the worker scans them (store.py). The scan is offline and deterministic: fixed, linear-time rules, no
model. Flags inform; they never change the stored text (services/flags/reading.py decides what a caller
receives).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from services.flags.hidden import MARKS_KEY, OVERFLOW_KEY, mark_hits
from services.flags.markdown_hidden import Labels, has_unreferenced_definition
from services.flags.normal import invisible_inside_word, mixed_script_word, reader_view
from services.flags.rules import CODE_FENCE, CODE_SPAN, HIDDEN_RULE, MARKDOWN_ESCAPE, TEXT_RULES

FLAG_NAMES = (
    "hidden_text",
    "invisible_chars",
    "mixed_script",
    "prompt_injection",
    "system_prompt",
    "tool_call",
    "remote_shell",
)
#: the pseudo-flag of a chunk stored before flags existed and not scanned yet
UNSCANNED = "unscanned"

#: bidirectional embeddings, overrides and isolates ("Trojan source"); marks (U+200E/F) are fine
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
COMMENT_MIN_WORDS = 4
#: a bidi control or a tag character (is_tag_character's ranges), found at C speed
BIDI_OR_TAG = re.compile("[" + "".join(sorted(BIDI_CONTROLS)) + "\U000e0000-\U000e007f\U000e0100-\U000e01ef]")


def is_tag_character(char: str) -> bool:
    """Unicode tag characters (U+E0000-E007F) and the variation-selector supplement: invisible carriers
    of ASCII ("ASCII smuggling")."""
    code = ord(char)
    return 0xE0000 <= code <= 0xE007F or 0xE0100 <= code <= 0xE01EF


def has_invisible_chars(text: str) -> bool:
    """Tag or bidi-control characters anywhere, or an invisible character inside a word (normal.py)."""
    if text.isascii():  # the common case, at C speed: nothing of the kind
        return False
    if BIDI_OR_TAG.search(text) is not None:
        return True
    return invisible_inside_word(text)


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


def has_hidden_markup(text: str, referenced: frozenset[str] | Labels | None = None) -> bool:
    """Raw markup a renderer hides, outside code: an HTML comment, a hidden element, or a markdown link
    reference definition no link uses (`[//]: # (...)`: markdown_hidden.py; `referenced`: the labels
    the whole document uses, when known)."""
    if "<" not in text and "]:" not in text:
        return False
    prose = prose_only(text)
    if "]:" in prose and has_unreferenced_definition(prose, referenced):
        return True
    return "<" in prose and (has_hidden_comment(prose) or HIDDEN_RULE.search(prose) is not None)


def scan_text(text: str, marks: Iterable[str] = (), referenced: frozenset[str] | Labels | None = None) -> list[str]:
    """The flags of one chunk's text (in FLAG_NAMES order); `marks` is its document's hidden-text
    evidence from the page pipeline (services/flags/hidden.py); `referenced` the link labels its
    document uses (markdown_hidden.py)."""
    found = set()
    if mark_hits(text, marks) or has_hidden_markup(text, referenced):
        found.add("hidden_text")
    if has_invisible_chars(text):
        found.add("invisible_chars")
    if mixed_script_word(text):
        found.add("mixed_script")
    shown = MARKDOWN_ESCAPE.sub(r"\1", text) if "\\" in text else text
    views = (shown,) if shown.isascii() else (shown, reader_view(shown))  # as stored, and as read
    for flag, rule in TEXT_RULES.items():
        if any(rule.search(view) is not None for view in views):
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
    overflowed = bool((metadata or {}).get(OVERFLOW_KEY))  # more hidden text than marks: all of it flagged
    title_flags = scan_text(title) if title else []
    # read only when a chunk holds a definition (most documents have none, and reading every line for
    # the labels was most of a code file's flag scan)
    referenced = Labels([chunk.text for chunk in chunks])
    out = []
    for chunk in chunks:
        headings = " > ".join(chunk.heading_path or [])
        # a blank line after the headings: the chunk's first line starts a block (a definition may not
        # interrupt a paragraph, markdown_hidden.py)
        flags = scan_text(f"{headings}\n\n{chunk.text}" if headings else chunk.text, marks, referenced)
        hidden = ["hidden_text"] if overflowed else []
        out.append([n for n in FLAG_NAMES if n in flags or n in title_flags or n in hidden])
    return out


__all__ = ["FLAGS_COLUMN", "FLAG_NAMES", "UNSCANNED", "chunk_flags", "document_marks", "merge_flags", "scan_text"]
