"""Published tool definitions: compact input schemas, dedented descriptions and output schemas.

Every reply is `{"success": true, ...}` or the error contract, so each output schema is one object
with `success` required and the tool's own top-level keys (others allowed). The error fields (error,
error_code, retryable, suggestion) are the same for every tool: the server's instructions name them
once, rather than four output schemas repeating them in `tools/list`.
"""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.mcpserver import MCPServer

S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}
B = {"type": "boolean"}
O = {"type": "object"}  # noqa: E741
A = {"type": "array"}
ANY: dict[str, Any] = {}
NS = {"type": ["string", "null"]}
NI = {"type": ["integer", "null"]}
COMMON = {"success": B}


def output(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {**COMMON, **properties}, "required": ["success"]}


SEARCH_OUTPUT = output(results=A, passages=A, count=I, tokens_used=I, answer=NS, citations=A)
DOCUMENT_OUTPUT = output(document=O, documents=A, content=O, outline=O, chunk=O, total_count=I)
SOURCE_OUTPUT = output(source=O, sources=A, total_count=I)
CRAWL_OUTPUT = output(crawl_job=O, jobs=A, total_count=I)

OUTPUT_SCHEMAS = {
    "search_knowledge_base": SEARCH_OUTPUT,
    "manage_document": DOCUMENT_OUTPUT,
    "manage_source": SOURCE_OUTPUT,
    "crawl_website": CRAWL_OUTPUT,
}


def lean_property(prop: dict[str, Any]) -> dict[str, Any]:
    """Drop titles; an optional `anyOf [X, null]` defaulting to null is published as plain X (optional
    arguments are simply left out; the server still accepts null)."""
    prop = {k: v for k, v in prop.items() if k != "title"}
    variants = prop.get("anyOf")
    if variants and all(set(v) <= {"type", "items", "additionalProperties", "enum"} for v in variants):
        if "default" in prop and prop["default"] is None:
            variants = [v for v in variants if v.get("type") != "null"]
            del prop["default"]
        types = [v["type"] for v in variants]
        extra = {k: v for variant in variants for k, v in variant.items() if k != "type"}
        prop = {k: v for k, v in prop.items() if k != "anyOf"}
        prop = {"type": types if len(types) > 1 else types[0], **extra, **prop}
    if prop.get("additionalProperties") is True:
        del prop["additionalProperties"]
    return prop


def lean_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    properties = {name: lean_property(p) for name, p in schema.get("properties", {}).items()}
    lean: dict[str, Any] = {"type": "object", "properties": properties}
    if schema.get("required"):
        lean["required"] = schema["required"]
    return lean


def publish(mcp: MCPServer, name: str) -> None:
    """Publish a registered tool lean: dedented description, compact input schema, output schema."""
    tool = mcp._tool_manager.get_tool(name)
    assert tool is not None, name
    tool.description = inspect.cleandoc(tool.description)
    tool.parameters = lean_input_schema(tool.parameters)
    tool.fn_metadata.output_schema = OUTPUT_SCHEMAS[name]
    tool.__dict__.pop("output_schema", None)  # a cached_property: recompute from the new schema
