"""One tree-sitter parse of a file for both of its readers: the code chunker (services/chunking/code.py)
and the symbol table (services/code/symbols.py) each parsed every synced code file, one right after
the other, in the same thread (issue 36: ~7 s of a million-line ingest's CPU went to the second parse).

`parse` keeps the last few trees of each thread with the exact bytes they were parsed from, so the
second reader gets the first one's tree only for the same grammar and identical bytes; trees are only
read (never edited), and a thread never sees another's. Large sources are not kept (their trees are
large; the budgets bound what is parsed at all).
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any, cast

KEEP = 4  # trees kept per thread: the documents one lane pair is between (STORE_LANES), and a spare
MAX_BYTES = 1024 * 1024  # larger sources are parsed each time

_local = threading.local()


@cache
def parser(grammar: str) -> Any:
    """The tree-sitter parser of a tree-sitter-language-pack grammar."""
    from tree_sitter_language_pack import get_parser

    return get_parser(cast("Any", grammar))


def parse(grammar: str, source: bytes) -> Any:
    """The syntax tree of `source`: the one parsed last from the same bytes in this thread, else new."""
    recent: list[tuple[str, bytes, Any]] = _local.__dict__.setdefault("recent", [])
    for i, (kept_grammar, kept_source, tree) in enumerate(recent):
        if kept_grammar == grammar and kept_source == source:
            del recent[i]  # each reader parses a file once: the second hands the tree back
            return tree
    tree = parser(grammar).parse(source)
    if len(source) <= MAX_BYTES:
        recent.insert(0, (grammar, source, tree))
        del recent[KEEP:]
    return tree
