"""Path globs of grep and list: `httpx/_client.py`, `**/tests/**`, `*.py`, `docs/`.

`*` and `?` stay inside one path segment, `**` crosses segments (`**/` also matches no directory),
`[...]` is a character class; a glob without `/` matches a file name at any depth (as .gitignore does),
one ending in `/` everything under that directory. Translated to an anchored RE2 pattern: linear time
over the paths, whatever the glob.
"""

from __future__ import annotations

import re

import re2

from services.core.errors import InvalidArgument

MAX_GLOB = 500


def glob_pattern(glob: str) -> str:
    """The RE2 pattern a whole path must match for `glob`."""
    glob = glob.strip().lstrip("/")
    if glob.endswith("/"):
        glob += "**"
    if "/" not in glob:
        glob = "**/" + glob
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end]
            negated = body.startswith(("!", "^"))
            body = body[1:] if negated else body
            out.append("[" + ("^" if negated else "") + body.replace("\\", "\\\\").replace("[", "\\[") + "]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


def compile_glob(glob: str) -> re2._Regexp:
    """An RE2 matcher of whole paths for `glob` (InvalidArgument for an empty or unreadable one)."""
    if not glob.strip() or len(glob) > MAX_GLOB:
        raise InvalidArgument(
            f"path must be a glob of 1 to {MAX_GLOB} characters.", "Use e.g. path='src/app.py' or '**/tests/**'."
        )
    try:
        return re2.compile(f"(?s)\\A(?:{glob_pattern(glob)})\\z")
    except re2.error:
        raise InvalidArgument(
            f"path '{glob[:100]}' is not a glob that can be read.", "Use * ? ** and [abc] only."
        ) from None


def matches(matcher: re2._Regexp, path: str) -> bool:
    return matcher.search(path) is not None
