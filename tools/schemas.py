"""Published tool definitions: the reply models whose JSON schema is each tool's `outputSchema`, and the
compact form of input schemas.

Every reply is `{"success": true, ...}` or the error contract, so each reply model is one object with
`success` required and the tool's own top-level keys (others allowed: `extra="allow"`). The error fields
(error, error_code, retryable, suggestion) are the same for every tool: the server's instructions name
them once, rather than four output schemas repeating them in `tools/list`.

A reply model publishes its schema compact (`Reply.__get_pydantic_json_schema__`): no titles, no
defaults, an optional field as its plain type. The SDK derives `outputSchema` from the model named in a
tool's return annotation (`Annotated[CallToolResult, SearchReply]`) and checks each successful reply's
structured content against it: the schema is built once, from the model, through the SDK's public API.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

#: Top-level reply values, published by JSON type only (their items are described in the tool docs).
JsonArray = Annotated[list[Any], WithJsonSchema({"type": "array"})]
JsonObject = Annotated[dict[str, Any], WithJsonSchema({"type": "object"})]
NullableText = Annotated[str | None, WithJsonSchema({"type": ["string", "null"]})]


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


def published(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """An output schema with its keys in the published order (type, properties, required): the SDK's
    generator sorts keys, and `tools/list` stays byte for byte what agents have seen."""
    if schema is None:
        return None
    return {key: schema[key] for key in ("type", "properties", "required") if key in schema}


class Reply(BaseModel):
    """A tool's successful reply: `success` and the tool's own top-level keys; any other key allowed."""

    model_config = ConfigDict(extra="allow")

    success: bool

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        full = handler.resolve_ref_schema(handler(core_schema))
        properties = {}
        for name, prop in full.get("properties", {}).items():
            lean = lean_property(prop)
            lean.pop("default", None)
            properties[name] = lean
        return {"type": "object", "properties": properties, "required": full.get("required", [])}


class SearchReply(Reply):
    results: JsonArray | None = None
    passages: JsonArray | None = None
    count: int | None = None
    tokens_used: int | None = None
    answer: NullableText = None
    citations: JsonArray | None = None


class DocumentReply(Reply):
    document: JsonObject | None = None
    documents: JsonArray | None = None
    content: JsonObject | None = None
    outline: JsonObject | None = None
    chunk: JsonObject | None = None
    total_count: int | None = None


class SourceReply(Reply):
    source: JsonObject | None = None
    sources: JsonArray | None = None
    total_count: int | None = None


class CrawlReply(Reply):
    crawl_job: JsonObject | None = None
    jobs: JsonArray | None = None
    total_count: int | None = None
