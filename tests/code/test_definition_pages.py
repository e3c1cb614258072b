"""A name with many definitions (issue 36): ranking reads only what it ranks by, the page's rows come
whole afterwards. Every page holds the right definitions, each with its own kind, span, signature,
docstring and parent; the pages together are every definition once; the total is exact."""

from __future__ import annotations

import pytest

from services.app import Archivist
from services.code.symbol_search import PARTS, split_parts

FILES = 45  # 3 definitions of `run` each: more than six pages


def module(n: int) -> str:
    return (
        f"def run(a{n}):\n    '''Run number {n}.'''\n    return a{n}\n\n\n"
        f"class Job{n}:\n    def run(self, b{n}, c{n}):\n        '''The job {n}.'''\n        return b{n}\n\n\n"
        f"RUN_{n} = 1\n\n\ndef _helper():\n    def run(z):\n        return z\n    return run\n"
    )


@pytest.mark.parametrize("text", ["a.b::C#d->e", "", "::", "a..b", ":::x", "-->", "a->b->", "#.#"])
def test_split_parts_is_the_separator_split(text: str) -> None:
    assert split_parts(text) == PARTS.split(text)


@pytest.mark.usefixtures("owner")
async def test_pages_of_a_common_name_are_whole_and_exact(app: Archivist) -> None:
    source = await app.sources.create(title="Many runs")
    for n in range(FILES):
        path = f"pkg{n % 3}/{'tests/' if n % 5 == 0 else ''}m{n:02d}.py"
        await app.documents.ingest(
            source.id, path, module(n), "code", f"file:///r/{path}", {"language": "python", "path": path}, embed=False
        )
    seen = []
    offset: int | None = 0
    while offset is not None:
        page = await app.symbols.definitions("run", [source.id], offset, 20)
        assert page.total == 3 * FILES
        for hit in page.hits:
            n = int(hit.path.rsplit("/m", 1)[1][:2])
            if hit.parent is None:
                assert (hit.kind, hit.line_start, hit.line_end) == ("function", 1, 3)
                assert (hit.signature, hit.doc) == (f"def run(a{n})", f"Run number {n}.")
            elif hit.parent.endswith(f"Job{n}"):
                assert (hit.kind, hit.line_start, hit.line_end) == ("method", 7, 9)
                assert (hit.signature, hit.doc) == (f"def run(self, b{n}, c{n})", f"The job {n}.")
            else:
                assert hit.parent.endswith("_helper")
                assert (hit.kind, hit.line_start, hit.signature, hit.doc) == ("function", 16, "def run(z)", "")
            assert hit.qualified_name == f"{hit.parent}.run" if hit.parent else hit.qualified_name.endswith(".run")
            seen.append((hit.path, hit.line_start))
        offset = page.next_offset
    assert len(seen) == len(set(seen)) == 3 * FILES
    first = (await app.symbols.definitions("run", [source.id], 0, 20)).hits
    assert all("tests/" not in h.path for h in first)  # outside tests first, shallow first
    assert [h.line_start for h in first[:3]] == [1, 1, 1]
