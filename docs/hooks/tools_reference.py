"""MkDocs hook: the tool reference page, generated from the server's own `tools/list` (and its
`prompts/list`) at build time, so the documentation cannot drift from the schemas agents see."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
PAGE = "reference/tools.md"


def published() -> tuple[list[Any], list[Any]]:
    """The server's tools and prompts, as `tools/list` and `prompts/list` give them."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from server import build_server
    from services.core.settings import Settings

    server = build_server(Settings(_env_file=None), run_worker=False, watch=False)

    async def both() -> tuple[list[Any], list[Any]]:
        return await server.list_tools(), await server.list_prompts()

    return asyncio.run(both())


def type_of(prop: dict[str, Any]) -> str:
    kind = prop.get("type") or ("any" if not prop.get("anyOf") else "|".join(p.get("type", "?") for p in prop["anyOf"]))
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if prop.get("enum"):
        kind += ": " + ", ".join(f"`{v}`" for v in prop["enum"])
    return str(kind)


def cell(text: Any) -> str:
    return " ".join(str(text or "").split()).replace("|", "\\|")


def tool_section(tool: Any) -> str:
    schema = tool.input_schema or {}
    required = set(schema.get("required") or [])
    rows = [
        f"| `{name}` | {cell(type_of(prop))} | {'yes' if name in required else ''} | {cell(prop.get('description'))} |"
        for name, prop in (schema.get("properties") or {}).items()
    ]
    outputs = ", ".join(f"`{k}`" for k in ((tool.output_schema or {}).get("properties") or {}))
    return "\n".join(
        [
            f"## `{tool.name}`",
            "",
            "```text",
            (tool.description or "").strip(),
            "```",
            "",
            "| parameter | type | required | description |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Reply keys: {outputs}.",
            "",
        ]
    )


def prompt_section(prompt: Any) -> str:
    rows = [f"| `{a.name}` | {'yes' if a.required else ''} | {cell(a.description)} |" for a in prompt.arguments or []]
    return "\n".join(
        [f"### `{prompt.name}`", "", cell(prompt.description), "", "| argument | required | description |",
         "|---|---|---|", *rows, ""]
    )  # fmt: skip


def render(tools: list[Any], prompts: list[Any] = ()) -> str:
    size = len(json.dumps([t.model_dump(exclude_none=True) for t in tools]))
    head = [
        "# Tool reference",
        "",
        "Generated at build time from the server's own `tools/list` (descriptions and input schemas as",
        f"agents receive them: {size:,} characters of JSON in all).",
        "",
    ]
    tail = ["## Prompts", "", "From the server's `prompts/list` (`prompts/get` renders them).", ""] if prompts else []
    return "\n".join(head + [tool_section(t) for t in tools] + tail + [prompt_section(p) for p in prompts])


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, content=render(*published())))
    return files
