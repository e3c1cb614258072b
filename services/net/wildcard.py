"""robots.txt path patterns (`*` for any run of characters, a trailing `$` to anchor the end), matched
without a regex.

A rule such as `Disallow: /*a*a*a*a*b` compiled to `.*a.*a.*a.*a.*b` backtracks polynomially (and for
more stars, practically forever) on a long path of `a`s. Here the pattern is split at `*` and each
piece is found left-most in turn, which is exact for `*`-only globs and costs one pass over the path.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote


@dataclass(frozen=True)
class Wildcard:
    """One robots.txt path pattern, ready to match paths (from their first character)."""

    pieces: tuple[str, ...]  # the literal text between stars; one piece when there is no star
    anchored: bool  # the pattern ended with `$`: the path must end where the pattern ends

    @classmethod
    def compile(cls, pattern: str) -> Wildcard:
        """A pattern as written in robots.txt: percent-escapes are decoded after the `$` is read."""
        anchored = pattern.endswith("$")
        body = unquote(pattern[:-1] if anchored else pattern)
        return cls(tuple(body.split("*")), anchored)

    def matches(self, path: str) -> bool:
        """Whether `path` starts with the pattern (or is exactly matched by it when anchored)."""
        first, *middle = self.pieces
        if not path.startswith(first):
            return False
        if not middle:
            return not self.anchored or len(path) == len(first)
        *inner, last = middle
        position = len(first)
        for piece in inner:
            found = path.find(piece, position)
            if found == -1:
                return False
            position = found + len(piece)
        if self.anchored:
            return len(path) - len(last) >= position and path.endswith(last)
        return path.find(last, position) != -1
