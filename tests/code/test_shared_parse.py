"""The chunker and the symbol table read one parse of a file (services/chunking/trees.py, issue 36): the
second reader of the same bytes gets the first one's tree, and only that reader, in that thread; other
bytes or another grammar are parsed anew. Chunks and symbols of a file stay what separate parses gave."""

from __future__ import annotations

import threading

from services.chunking.code import CodeChunker
from services.chunking.trees import parse
from services.code.symbols import extract

SOURCE = b"def f(a):\n    return g(a)\n\n\nclass K:\n    def m(self):\n        return f(1)\n"


def test_the_second_reader_gets_the_first_readers_tree() -> None:
    first = parse("python", SOURCE)
    assert parse("python", SOURCE) is first
    assert parse("python", SOURCE) is not first  # handed on once: a third reader parses again
    assert parse("python", SOURCE + b"\n") is not parse("python", SOURCE)
    kept = parse("python", SOURCE)
    assert parse("javascript", SOURCE) is not kept


def test_another_thread_never_gets_a_tree_of_this_one() -> None:
    source = SOURCE + b"# parsed in two threads\n"
    tree = parse("python", source)
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(parse("python", source)))
    thread.start()
    thread.join()
    assert seen[0] is not tree
    assert parse("python", source) is tree


def test_chunks_and_symbols_from_one_parse_are_those_of_two() -> None:
    text = SOURCE.decode()
    chunks = CodeChunker(400, 0, "python", "m.py").chunk(text)
    shared = extract(text, "python", "m.py")  # the chunker's tree
    alone = extract(text, "python", "m.py")  # a parse of its own
    assert shared == alone and [d.name for d in shared.definitions] == ["f", "K", "m"]
    assert CodeChunker(400, 0, "python", "m.py").chunk(text) == chunks
