"""Archivist's usage guide as an Agent Skill: the `io.modelcontextprotocol/skills` extension (SEP-2640).

The guide (guide/archivist/: SKILL.md and its references) says which search to run, how to read long
documents, how to crawl politely, and how versions and injection flags work, without growing
`tools/list`. Through the SDK's extension API (`mcp.server.extension.Extension`), as tools/tasks.py serves
the tasks extension:

- every file is an ordinary resource, `skill://archivist/<path>` (text/markdown), read with
  `resources/read`: clients without the extension read it too (the server's instructions name the URI,
  and the first page of `resources/list` holds SKILL.md);
- `skills/list` and `skills/get`, for a client that declares the extension (else -32021, the SDK's
  missing-capability error), answer the spec's Skill entry: the verbatim frontmatter and a complete
  manifest of the files with their SHA-256 digests and sizes.

Both methods and the reads are requests like any other, so AccessMiddleware (access/guard.py) gates them:
the caller's scope, rate limit and one audit record each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from mcp.server.extension import Extension, MethodBinding, ResourceBinding
from mcp.server.mcpserver.resources import TextResource
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, RequestParams, Resource
from pydantic import ConfigDict

SKILLS = "io.modelcontextprotocol/skills"
ROOT = Path(__file__).resolve().parent / "guide"
SKILL_NAME = "archivist"
SKILL_URI = f"skill://{SKILL_NAME}/SKILL.md"
TTL_MS = 3_600_000  # the guide changes only with the server


@dataclass(frozen=True)
class SkillFile:
    uri: str
    text: str

    @property
    def raw(self) -> bytes:
        return self.text.encode("utf-8")


def uri_of(path: str) -> str:
    return f"skill://{SKILL_NAME}/{path}"


@cache
def skill_files() -> tuple[SkillFile, ...]:
    """SKILL.md first, then every other file of the skill, as `skill://archivist/<path>`."""
    base = ROOT / SKILL_NAME
    paths = sorted(p for p in base.rglob("*") if p.is_file())
    paths.sort(key=lambda p: p.name != "SKILL.md")
    return tuple(
        SkillFile(f"skill://{SKILL_NAME}/{p.relative_to(base).as_posix()}", p.read_text("utf-8")) for p in paths
    )


def frontmatter(text: str) -> dict[str, Any]:
    """SKILL.md's YAML frontmatter as written (name and description at least)."""
    _, head, _ = text.split("---", 2)
    return dict(yaml.safe_load(head))


@cache
def skill_entry() -> dict[str, Any]:
    """The spec's Skill entry: uri, verbatim frontmatter, and the complete manifest of files."""
    files = skill_files()
    manifest = [
        {"uri": f.uri, "digest": "sha256:" + hashlib.sha256(f.raw).hexdigest(), "size": len(f.raw)} for f in files
    ]
    return {"uri": SKILL_URI, "frontmatter": frontmatter(files[0].text), "resources": manifest}


def skill_listing() -> Resource:
    """SKILL.md as a `resources/list` entry (the first page lists it for clients without the extension)."""
    meta = skill_entry()["frontmatter"]
    return Resource(uri=SKILL_URI, name=meta["name"], description=meta["description"], mime_type="text/markdown")


class ListSkillsParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    cursor: str | None = None


class GetSkillParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    uri: str


class GuideSkill(Extension):
    """Serves the usage guide through the skills extension (see the module docstring)."""

    identifier = SKILLS

    def resources(self) -> Sequence[ResourceBinding]:
        entry = skill_entry()["frontmatter"]
        bindings = []
        for f in skill_files():
            name = entry["name"] if f.uri == SKILL_URI else f.uri.rsplit("/", 1)[-1]
            description = entry["description"] if f.uri == SKILL_URI else f"Part of the {SKILL_NAME} skill."
            resource = TextResource(
                uri=f.uri, name=name, description=description, mime_type="text/markdown", text=f.text
            )
            bindings.append(ResourceBinding(resource=resource))
        return bindings

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("skills/list", ListSkillsParams, self.list_skills),
            MethodBinding("skills/get", GetSkillParams, self.get_skill),
        )

    async def list_skills(self, ctx: Any, params: ListSkillsParams) -> dict[str, Any]:
        require_client_extension(ctx, SKILLS)
        return {"resultType": "complete", "skills": [skill_entry()], "ttlMs": TTL_MS, "cacheScope": "public"}

    async def get_skill(self, ctx: Any, params: GetSkillParams) -> dict[str, Any]:
        require_client_extension(ctx, SKILLS)
        if params.uri != SKILL_URI:
            raise MCPError(INVALID_PARAMS, f"Unknown skill: {params.uri[:200]}. This server serves {SKILL_URI}.")
        return {"resultType": "complete", "skill": skill_entry(), "ttlMs": TTL_MS, "cacheScope": "public"}
