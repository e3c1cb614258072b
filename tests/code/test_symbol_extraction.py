"""Symbols from the syntax tree (services/code/symbols.py), per language, on small inline sources:
each definition's kind, qualified name, parent, line span, signature and docstring, and references
that leave definitions out."""

from __future__ import annotations

import pytest

from services.code.symbols import Definition, extract, path_qualifier

PYTHON = '''import os.path
from shutil import copytree

LIMIT = 3


class Path:
    """A filesystem path.

    More detail."""

    SEP = "/"

    def read_text(self, encoding=None):
        """Read the file as text."""
        local = 1
        return copytree(self).decode(encoding)

    @property
    def name(self):
        return self.read_text()


def top(a,
        b):
    pass
'''


def by_name(definitions: list[Definition]) -> dict[str, Definition]:
    return {d.qualified_name: d for d in definitions}


def test_python_definitions_are_qualified_with_spans_signatures_and_docstrings() -> None:
    symbols = extract(PYTHON, "python", "Lib/pathlib/__init__.py")
    found = {f"Lib.pathlib.{name}": d for name, d in by_name(symbols.definitions).items()}
    assert path_qualifier("python", "Lib/pathlib/__init__.py") == "Lib.pathlib"  # added when read
    assert path_qualifier("python", "shutil.py") == "shutil" and path_qualifier("go", "a/b.go") == ""
    assert list(found) == [
        "Lib.pathlib.LIMIT", "Lib.pathlib.Path", "Lib.pathlib.Path.SEP", "Lib.pathlib.Path.read_text",
        "Lib.pathlib.Path.name", "Lib.pathlib.top",
    ]  # fmt: skip
    path = found["Lib.pathlib.Path"]
    assert (path.kind, path.line_start, path.line_end, path.signature) == ("class", 7, 21, "class Path")
    assert path.doc == "A filesystem path."
    method = found["Lib.pathlib.Path.read_text"]
    assert (method.kind, method.parent, method.line_start, method.line_end) == ("method", "Path", 14, 17)
    assert method.signature == "def read_text(self, encoding=None)" and method.doc == "Read the file as text."
    assert found["Lib.pathlib.top"].signature == "def top(a, b)"
    assert found["Lib.pathlib.top"].kind == "function" and found["Lib.pathlib.LIMIT"].kind == "constant"
    assert "local" not in {d.name for d in symbols.definitions}  # a function's locals are not definitions


def test_python_references_leave_definitions_out() -> None:
    symbols = extract(PYTHON, "python", "m.py")
    assert symbols.references["copytree"] == [2, 17]  # the import and the call
    assert symbols.references["read_text"] == [21]  # the attribute access, not the def on line 14
    assert "Path" not in symbols.references and "top" not in symbols.references
    assert symbols.capped is None


SOURCES = {
    "javascript": (
        "// Adds two.\nfunction add(a, b) { return a + b }\nclass Foo extends Bar {\n  run(x) { return go(x) }\n}\n"
        "const helper = () => add(1, 2)\nexport const LIMIT = 5\n",
        {("add", "function", None, 2, 2), ("Foo", "class", None, 3, 5), ("Foo.run", "method", "Foo", 4, 4),
         ("helper", "function", None, 6, 6), ("LIMIT", "constant", None, 7, 7)},
        {"add": [6], "Bar": [3], "go": [4]},
    ),
    "typescript": (
        "interface Shape { area(): number }\ntype Id = string\nexport class Box implements Shape {\n"
        "  area(): number { return 1 }\n}\n",
        {("Shape", "interface", None, 1, 1), ("Shape.area", "method", "Shape", 1, 1), ("Id", "type", None, 2, 2),
         ("Box", "class", None, 3, 5), ("Box.area", "method", "Box", 4, 4)},
        {"Shape": [3]},
    ),
    "go": (
        "package sync\n\n// Mutex is a lock.\ntype Mutex struct { state int32 }\n\n"
        "func (m *Mutex) Lock() {\n\tm.lockSlow()\n}\nconst MaxWaiters = 3\n",
        {("sync.Mutex", "type", None, 4, 4), ("sync.Mutex.Lock", "method", "sync.Mutex", 6, 8),
         ("sync.MaxWaiters", "constant", None, 9, 9)},
        {"lockSlow": [7], "Mutex": [6]},
    ),
    "rust": (
        "/// Spawns a task.\npub fn spawn(f: F) -> JoinHandle { rt::spawn_inner(f) }\npub struct Runtime;\n"
        "impl Runtime {\n    pub fn block_on(&self) {}\n}\nmod task {\n    pub fn yield_now() {}\n}\n",
        {("spawn", "function", None, 2, 2), ("Runtime", "struct", None, 3, 3),
         ("Runtime::block_on", "method", "Runtime", 5, 5), ("task", "module", None, 7, 9),
         ("task::yield_now", "function", "task", 8, 8)},
        {"spawn_inner": [2], "Runtime": [4]},
    ),
    "java": (
        "package com.acme;\n/** A widget. */\npublic class Widget {\n  static final int SIZE = 3;\n"
        "  void draw(Canvas c) { c.paint(this); }\n}\n",
        {("com.acme.Widget", "class", None, 3, 6), ("com.acme.Widget.SIZE", "constant", "com.acme.Widget", 4, 4),
         ("com.acme.Widget.draw", "method", "com.acme.Widget", 5, 5)},
        {"paint": [5], "Canvas": [5]},
    ),
    "c": (
        "#define MAX 10\nstruct point { int x; };\n/* Adds. */\nstatic int add(int a, int b) { return helper(a); }\n",
        {("MAX", "constant", None, 1, 1), ("point", "struct", None, 2, 2), ("add", "function", None, 4, 4)},
        {"helper": [4]},
    ),
    "cpp": (
        "namespace net {\nclass Socket {\n public:\n  void send(int n) { write(n); }\n};\n}\n"
        "void net::Socket::close() { shutdown(); }\n",
        {("net", "module", None, 1, 6), ("net::Socket", "class", "net", 2, 5),
         ("net::Socket::send", "method", "net::Socket", 4, 4), ("net::Socket::close", "function", "net::Socket", 7, 7)},
        {"write": [4], "shutdown": [7], "net": [7], "Socket": [7]},  # the qualifier of close uses them
    ),
    "ruby": (
        "module Net\n  class HTTP\n    VERSION = '1'\n    # Starts.\n    def start(x)\n      connect(x)\n    end\n"
        "  end\nend\n",
        {("Net", "module", None, 1, 9), ("Net::HTTP", "class", "Net", 2, 8),
         ("Net::HTTP::VERSION", "constant", "Net::HTTP", 3, 3), ("Net::HTTP::start", "method", "Net::HTTP", 5, 7)},
        {"connect": [6]},
    ),
}  # fmt: skip


@pytest.mark.parametrize("language", sorted(SOURCES))
def test_each_language_gives_its_definitions_and_references(language: str) -> None:
    source, definitions, references = SOURCES[language]
    symbols = extract(source, language, "src/file")
    got = {(d.qualified_name, d.kind, d.parent, d.line_start, d.line_end) for d in symbols.definitions}
    assert got == definitions
    for name, lines in references.items():
        assert symbols.references.get(name) == lines, (name, symbols.references.get(name))
    defined = {d.name for d in symbols.definitions}
    assert all(d.signature for d in symbols.definitions)
    assert not {n for n in defined if symbols.references.get(n) and n not in references}, "a definition counted"


def test_comments_above_a_definition_are_its_doc() -> None:
    docs = {d.name: d.doc for d in extract(SOURCES["go"][0], "go").definitions}
    assert docs["Mutex"] == "Mutex is a lock."
    docs = {d.name: d.doc for d in extract(SOURCES["rust"][0], "rust").definitions}
    assert docs["spawn"] == "Spawns a task."


def test_a_language_without_queries_and_broken_code() -> None:
    assert extract("SELECT 1;", "sql").definitions == []
    broken = extract("def ok():\n    pass\n\ndef broken(:\n", "python", "b.py")
    assert "ok" in {d.name for d in broken.definitions}  # tree-sitter recovers around the error


def test_a_file_over_the_input_budget_is_not_parsed_and_says_so() -> None:
    symbols = extract("var a=b(c);" * 400_000, "javascript", "bundle.min.js")
    assert symbols.definitions == [] and symbols.references == {}
    assert symbols.capped and "not parsed" in symbols.capped
