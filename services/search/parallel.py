"""The hybrid query's legs on two pooled connections at once (issue 37, hybrid latency).

As one statement (services/search/hybrid.py `HYBRID_SQL`) one backend runs the vector leg, then the
keyword leg, then the fusion: at a million chunks ~27 ms + ~43 ms one after the other, on a machine
whose other core sat idle. Here the same legs run as two statements on two connections at the same
time (the keyword leg right after its term statistics, the vector leg in its `hnsw.ef_search`
transaction, services/search/breadth.py), each returning its candidates (id, distance or keyword
score, rank); a third statement fuses them with the very fusion SQL of the one-statement query, the
legs' rows passed back as arrays, and reads the hit columns. Every value crosses the wire in binary
(float8, bigint, uuid), so the fused scores and their order are bit for bit the one statement's.

Both legs are given the same parameters as the one statement, so the caller's scope (the searched
sources, `$2`, decided once by `SearchService.searched_sources`) narrows each of them alike.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: a statement parameter, `$n`
PARAM = re.compile(r"\$([0-9]+)")

VECTOR_ROWS_SQL = "WITH {vec_leg}\nSELECT id, dist, rnk FROM vec"
KEYWORD_ROWS_SQL = "WITH {keyword_leg}\nSELECT false AS pending, id, kscore, rnk FROM kw"
#: with the pending leg (services/search/pending.py) its rows follow, marked
KEYWORD_PENDING_ROWS_SQL = KEYWORD_ROWS_SQL + "\nUNION ALL SELECT true, id, kscore, rnk FROM kwp"
#: a leg's rows back as the CTE the fusion reads; `{n}`: the first of its three array parameters
LEG_ARRAYS = "{name} AS (SELECT * FROM unnest(${a}::uuid[], ${b}::{score}[], ${c}::bigint[]) AS x(id, {column}, rnk))"


def renumbered(sql: str, args: Sequence[Any]) -> tuple[str, list[Any]]:
    """The statement with only the parameters it references, numbered from $1 in their order, and their
    values (`args[n - 1]` is `$n`'s): PostgreSQL must infer a type for every parameter it is sent."""
    used = sorted({int(n) for n in PARAM.findall(sql)})
    number = {n: i + 1 for i, n in enumerate(used)}
    return PARAM.sub(lambda m: f"${number[int(m.group(1))]}", sql), [args[n - 1] for n in used]


def leg_arrays(first: int, pending: bool, keyword_score: str = "float8") -> str:
    """The `vec`, `kw` (and with `pending`, `kwp`) CTEs over array parameters from `$first` on, three
    per leg (ids, distances or scores, ranks); `keyword_score` the keyword leg's score type."""
    legs = [("vec", "dist", "float8"), ("kw", "kscore", keyword_score)]
    if pending:
        legs.append(("kwp", "kscore", keyword_score))
    return ",\n".join(
        LEG_ARRAYS.format(name=name, a=first + 3 * i, b=first + 3 * i + 1, c=first + 3 * i + 2, score=score, column=col)
        for i, (name, col, score) in enumerate(legs)
    )


def columns(rows: Sequence[Any], score: str) -> list[list[Any]]:
    """A leg's rows as the three arrays `leg_arrays` reads: ids, `score`, ranks."""
    return [[r["id"] for r in rows], [r[score] for r in rows], [r["rnk"] for r in rows]]


def keyword_columns(rows: Sequence[Any], pending: bool) -> list[list[Any]]:
    """The keyword statement's rows as the arrays of `kw` (and `kwp`)."""
    out = columns([r for r in rows if not r["pending"]], "kscore")
    if pending:
        out += columns([r for r in rows if r["pending"]], "kscore")
    return out
