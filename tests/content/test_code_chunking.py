"""Code-aware chunking with tree-sitter: chunk boundaries match the definitions of each language,
heading paths are file > class > function, offsets stay exact; other files fall back to the text chunker."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.chunking import MarkdownChunker, get_chunker
from services.chunking.base import Chunk
from services.chunking.code import CodeChunker
from services.core.settings import Settings
from tests.conftest import make_settings

PYTHON = '''"""Geometry helpers."""

import math

PI2 = math.pi * 2


# Area of a circle.
def area(radius: float) -> float:
    """Return the area."""
    return math.pi * radius**2


class Shape:
    """Base shape with a name and helpers to describe it in words."""

    sides = 0

    def describe(self) -> str:
        """A sentence about the shape, used in reports and logs."""
        return f"{self.name} has {self.sides} sides"

    @property
    def name(self) -> str:
        return type(self).__name__.lower()
'''

TYPESCRIPT = """import { readFile } from "fs";

/** Parse a config file. */
export function parseConfig(text: string): Config {
  return JSON.parse(text) as Config;
}

export interface Config {
  port: number;
  host: string;
}

export class Server {
  private port = 8080;

  /** Start listening on the configured port and log it. */
  start(config: Config): void {
    this.port = config.port;
    console.log(`listening on ${config.host}:${this.port}`);
  }

  stop(): void {
    console.log("stopped the server and released the port");
  }
}

const double = (x: number) => x * 2;
"""

JAVASCRIPT = """// Utilities for strings.
import path from "path";

function shout(text) {
  return text.toUpperCase() + "!";
}

export default class Greeter {
  constructor(name) {
    this.name = name || "anonymous visitor of the website";
  }

  // Say hello politely to the visitor.
  greet() {
    return `Hello, ${this.name}, welcome to the site`;
  }
}
"""

GO = """package server

import "fmt"

// Server answers requests.
type Server struct {
    Port int
}

// Start starts the server.
func (s *Server) Start() error {
    fmt.Println("starting on", s.Port)
    return nil
}

func main() {
    s := &Server{Port: 80}
    _ = s.Start()
}
""".replace("    ", "\t")

RUST = """use std::fmt;

/// A point in the plane.
#[derive(Debug, Clone)]
pub struct Point {
    x: f64,
    y: f64,
}

impl Point {
    /// The origin.
    pub fn origin() -> Point {
        Point { x: 0.0, y: 0.0 }
    }

    /// Distance to another point, computed with the Pythagorean theorem.
    pub fn distance(&self, other: &Point) -> f64 {
        ((self.x - other.x).powi(2) + (self.y - other.y).powi(2)).sqrt()
    }
}

fn main() {
    println!("{:?}", Point::origin());
}
"""

JAVA = """package demo;

import java.util.List;

/** A bank account. */
public class Account {
    private long balance;

    /** Deposit money into the account, rejecting negative amounts. */
    public void deposit(long amount) {
        if (amount < 0) throw new IllegalArgumentException("negative");
        balance += amount;
    }

    // Current balance in cents, as stored by the ledger service.
    public long balance() {
        return balance;
    }
}
"""


CSHARP = """using System;

namespace Bank
{
    /// <summary>An account.</summary>
    public class Account
    {
        private long balance;

        /// <summary>Deposit money, rejecting negative amounts.</summary>
        public void Deposit(long amount)
        {
            if (amount < 0) throw new ArgumentException("negative");
            balance += amount;
        }

        public long Balance() { return balance; }
    }
}
"""

RUBY = """require "json"

# A greeter for the front desk.
class Greeter
  # Say hello to a named visitor, politely and with enthusiasm.
  def greet(name)
    "Hello, #{name}! Welcome to the front desk of the building."
  end

  def self.default
    new
  end
end

def helper
  42
end
"""

PHP = """<?php
use App\\Models\\User;

/** Format a price in euros. */
function format_price($cents) {
    return number_format($cents / 100, 2) . " EUR";
}

class Cart {
    private $items = [];

    /** Add an item to the cart, merging quantities of equal items. */
    public function add($item, $quantity) {
        $this->items[$item] = ($this->items[$item] ?? 0) + $quantity;
    }
}
"""

SAMPLES: dict[str, tuple[str, str]] = {
    "sample.py": ("python", PYTHON),
    "sample.ts": ("typescript", TYPESCRIPT),
    "sample.js": ("javascript", JAVASCRIPT),
    "sample.go": ("go", GO),
    "sample.rs": ("rust", RUST),
    "Sample.java": ("java", JAVA),
    "Account.cs": ("csharp", CSHARP),
    "greeter.rb": ("ruby", RUBY),
    "cart.php": ("php", PHP),
}

#: (heading path below the file name, first line, last line) of every chunk, in order.
EXPECTED: dict[str, list[tuple[list[str], str, str]]] = {
    "sample.py": [
        ([], '"""Geometry helpers."""', "PI2 = math.pi * 2"),
        (["area"], "# Area of a circle.", "    return math.pi * radius**2"),
        (["Shape"], "class Shape:", "    sides = 0"),
        (["Shape", "describe"], "def describe(self) -> str:", '        return f"{self.name} has {self.sides} sides"'),
        (["Shape", "name"], "@property", "        return type(self).__name__.lower()"),
    ],
    "sample.ts": [
        ([], 'import { readFile } from "fs";', 'import { readFile } from "fs";'),
        (["parseConfig"], "/** Parse a config file. */", "}"),
        (["Config"], "export interface Config {", "}"),
        (["Server"], "export class Server {", "  private port = 8080;"),
        (["Server", "start"], "/** Start listening on the configured port and log it. */", "  }"),
        (["Server", "stop"], "stop(): void {", "}"),
        (["double"], "const double = (x: number) => x * 2;", "const double = (x: number) => x * 2;"),
    ],
    "sample.js": [
        ([], "// Utilities for strings.", 'import path from "path";'),
        (["shout"], "function shout(text) {", "}"),
        (["Greeter"], "export default class Greeter {", "}"),
    ],
    "sample.go": [
        ([], "package server", 'import "fmt"'),
        (["Server"], "// Server answers requests.", "}"),
        (["Server", "Start"], "// Start starts the server.", "}"),
        (["main"], "func main() {", "}"),
    ],
    "sample.rs": [
        ([], "use std::fmt;", "use std::fmt;"),
        (["Point"], "/// A point in the plane.", "}"),
        (["impl Point"], "impl Point {", "impl Point {"),
        (["impl Point", "origin"], "/// The origin.", "    }"),
        (["impl Point", "distance"], "/// Distance to another point, computed with the Pythagorean theorem.", "}"),
        (["main"], "fn main() {", "}"),
    ],
    "Sample.java": [
        ([], "package demo;", "import java.util.List;"),
        (["Account"], "/** A bank account. */", "    private long balance;"),
        (["Account", "deposit"], "/** Deposit money into the account, rejecting negative amounts. */", "    }"),
        (["Account", "balance"], "// Current balance in cents, as stored by the ledger service.", "}"),
    ],
    "Account.cs": [
        ([], "using System;", "using System;"),
        (["Bank"], "namespace Bank", "{"),
        (["Bank", "Account"], "/// <summary>An account.</summary>", "        private long balance;"),
        (
            ["Bank", "Account", "Deposit"],
            "/// <summary>Deposit money, rejecting negative amounts.</summary>",
            "        }",
        ),
        (["Bank", "Account", "Balance"], "public long Balance() { return balance; }", "}"),
    ],
    "greeter.rb": [
        ([], 'require "json"', 'require "json"'),
        (["Greeter"], "# A greeter for the front desk.", "class Greeter"),
        (["Greeter", "greet"], "# Say hello to a named visitor, politely and with enthusiasm.", "  end"),
        (["Greeter", "default"], "def self.default", "end"),
        (["helper"], "def helper", "end"),
    ],
    "cart.php": [
        ([], "<?php", "use App\\Models\\User;"),
        (["format_price"], "/** Format a price in euros. */", "}"),
        (["Cart"], "class Cart {", "    private $items = [];"),
        (["Cart", "add"], "/** Add an item to the cart, merging quantities of equal items. */", "}"),
    ],
}


#: Samples whose classes only split into members below the default test size of 200.
SMALLER_CHUNKS = {"greeter.rb": 150, "cart.php": 150}


def assert_invariants(content: str, chunks: list[Chunk], limit: int) -> None:
    """Exact offsets, trimmed, ordered, within the size limit, every non-blank character covered."""
    covered = bytearray(len(content))
    previous_start = -1
    for chunk in chunks:
        assert content[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.text.strip() and not chunk.text[0].isspace() and not chunk.text[-1].isspace()
        assert chunk.char_start > previous_start
        assert len(chunk.text) <= limit
        previous_start = chunk.char_start
        covered[chunk.char_start : chunk.char_end] = b"\x01" * (chunk.char_end - chunk.char_start)
    assert not [i for i, char in enumerate(content) if not char.isspace() and not covered[i]]


@pytest.mark.parametrize("file_name", list(SAMPLES))
def test_chunks_follow_definitions(file_name: str) -> None:
    language, content = SAMPLES[file_name]
    size = SMALLER_CHUNKS.get(file_name, 200)
    chunks = CodeChunker(size, 30, language, file_name).chunk(content)
    assert_invariants(content, chunks, int(size * 1.5))
    assert len(chunks) == len(EXPECTED[file_name])
    lines = [(c.text.split("\n")[0].strip(), c.text.split("\n")[-1]) for c in chunks]
    expected = EXPECTED[file_name]
    assert [c.heading_path for c in chunks] == [[file_name, *path] for path, _, _ in expected]
    assert lines == [(first.strip(), last) for _, first, last in expected]


def test_factory_picks_the_code_chunker_by_language() -> None:
    settings = Settings(chunk_size=400, chunk_overlap=40)
    chunker = get_chunker(settings, document_type="code", metadata={"language": "go", "file_path": "/x/main.go"})
    assert isinstance(chunker, CodeChunker) and chunker.prefix == ["main.go"]
    for metadata in ({"language": "sql"}, {}, None):
        fallback = get_chunker(settings, document_type="code", metadata=metadata)
        assert isinstance(fallback, MarkdownChunker) and fallback.mode == "code"


def test_large_function_is_split_to_the_size_limit() -> None:
    body = "".join(f"    total += compute_value_{i}(argument_{i})  # step {i}\n" for i in range(80))
    content = f"import os\n\n\ndef big(total):\n    '''Sum many things.'''\n{body}    return total\n"
    content += "\n\ndef tail():\n    pass\n"
    chunks = CodeChunker(500, 60, "python", "big.py").chunk(content)
    assert_invariants(content, chunks, 750)
    big = [c for c in chunks if c.heading_path == ["big.py", "big"]]
    assert len(big) >= 8 and big[0].text.startswith("def big(total):")
    assert big[-1].text.endswith("return total")
    assert chunks[-1].heading_path == ["big.py", "tail"] and chunks[-1].text == "def tail():\n    pass"


def test_non_ascii_source_keeps_exact_offsets() -> None:
    content = '# Café ☕ helpers — ünïcode 🙂\nGREETING = "héllo wörld 数据"\n\n\ndef naïve(x):\n    return "ñ" * x\n'
    chunks = CodeChunker(100, 10, "python", "u.py").chunk(content)
    assert_invariants(content, chunks, 150)
    assert [c.heading_path for c in chunks] == [["u.py"], ["u.py", "naïve"]]
    assert chunks[1].text == 'def naïve(x):\n    return "ñ" * x'


def test_every_utf8_width_and_a_lone_surrogate_keep_exact_offsets() -> None:
    """Byte offsets to characters over 1- to 4-byte characters and a lone surrogate (3 bytes passed through)."""
    widths = ["\x7f", "\x80", "\u07ff", "\u0800", "\ud800", "\uffff", "\U00010000", "\U0010ffff"]
    content = "".join(f"# {w} {i}\ndef f{i}(x):\n    return '{w * 3}' * x\n\n\n" for i, w in enumerate(widths))
    chunks = CodeChunker(60, 10, "python", "w.py").chunk(content)
    assert_invariants(content, chunks, 90)
    assert [c.heading_path[-1] for c in chunks] == [f"f{i}" for i in range(len(widths))]
    assert chunks[4].text == "# \ud800 4\ndef f4(x):\n    return '\ud800\ud800\ud800' * x"


def test_broken_and_random_code_still_covers_everything() -> None:
    rng = random.Random(7)
    pieces = [
        "def f{n}(a):\n    return a + {n}\n\n",
        "class C{n}:\n    def m(self):\n        return {n}\n\n",
        "x{n} = [1, 2,\n",
        "   )) garbage {n} ((\n",
        "# comment {n}\n",
        "@decorator\ndef g{n}():\n    '''doc {n}'''\n" + "    y = {n}\n" * 40 + "\n",
        "\n\n\n",
    ]
    for seed in range(20):
        content = "".join(rng.choice(pieces).format(n=i) for i in range(rng.randint(1, 60)))
        chunks = CodeChunker(300, 40, "python", f"r{seed}.py").chunk(content)
        if content.strip():
            assert_invariants(content, chunks, 450)
    for language in ("javascript", "typescript", "go", "rust", "java"):
        content = "}}} fn func class ( { [ " * 50
        assert_invariants(content, CodeChunker(200, 20, language).chunk(content), 300)


# --- through ingestion and search -------------------------------------------------------------------


@pytest.fixture(scope="module")
def settings(database_url: str, files_dir: Path) -> Settings:
    """Small chunks, so classes and impl blocks are split into their members as in the unit tests."""
    return make_settings(database_url, files_dir, chunk_size=200, chunk_overlap=30)


@pytest.fixture(scope="module")
async def code_source(app: Archivist, files_dir: Path) -> dict[str, Any]:
    folder = files_dir / "code"
    folder.mkdir()
    for name, (_, content) in SAMPLES.items():
        (folder / name).write_text(content)
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        source = await app.sources.create("Code")
        results, failures, _ = await app.documents.create_from_directory(source.id, folder)
    assert failures == []
    return {"source_id": source.id, "ids": {path.name: r.document.id for path, r in results}}


@pytest.mark.usefixtures("owner")
@pytest.mark.parametrize(
    ("query", "file_name", "heading_path"),
    [
        ("distance between points Pythagorean theorem", "sample.rs", ["sample.rs", "impl Point", "distance"]),
        ("deposit money negative amounts", "Sample.java", ["Sample.java", "Account", "deposit"]),
        ("start listening on the configured port", "sample.ts", ["sample.ts", "Server", "start"]),
    ],
)
async def test_search_finds_code_chunks_by_definition(
    app: Archivist, code_source: dict[str, Any], query: str, file_name: str, heading_path: list[str]
) -> None:
    outcome = await app.search.search(query, code_source["source_id"], match_count=3)
    top = outcome.hits[0]
    assert top.document_id == code_source["ids"][file_name]
    assert top.heading_path == heading_path
