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

List items are described by their views (models/views.py), once per tool under `$defs`, in the most
compact form that still names every field and its type: the field names of each JSON type as one
anchored alternation (`patternProperties`). One `properties` entry per field would cost about three
times the characters, more than `tools/list`'s budget of 7,000 holds. Items allow other keys (no
`additionalProperties: false`): a shaper's extra key must never turn a reply into an SDK error; the
tool tests check every live item against the views strictly instead (tests/tools/test_typed_replies.py).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from models.views import DocumentView, HitView, JobView, PassageView, SourceView

#: the views items are described by, by the name a tool's `$defs` gives them
VIEWS: dict[str, type[BaseModel]] = {
    "source": SourceView,
    "document": DocumentView,
    "job": JobView,
    "hit": HitView,
    "passage": PassageView,
}
#: where a reply model names a view (tools/schemas.published turns it into a `$ref` and a `$defs` entry)
VIEW_KEY = "$view"
#: The views `tools/list` publishes under `$defs`; the others are published by JSON type only (a bare
#: array or object). Empty because all five cost about 2,500 characters more than the budget of 7,000
#: holds (issue 40 point 5's closing note has the figures); the tool tests check every live item
#: against its view whether published or not, so publishing one is this line and a snapshot update.
PUBLISHED_VIEWS: frozenset[str] = frozenset()

#: Top-level reply values, published by JSON type only (their items are described in the tool docs).
JsonArray = Annotated[list[Any], WithJsonSchema({"type": "array"})]
JsonObject = Annotated[dict[str, Any], WithJsonSchema({"type": "object"})]
NullableText = Annotated[str | None, WithJsonSchema({"type": ["string", "null"]})]


def list_of(view: str) -> WithJsonSchema:
    """A top-level list whose items are `view`'s."""
    return WithJsonSchema({"type": "array", "items": {VIEW_KEY: view}})


def one(view: str) -> WithJsonSchema:
    """A top-level object that is one `view` (left out when it does not apply)."""
    return WithJsonSchema({VIEW_KEY: view})


HitList = Annotated[list[Any], list_of("hit")]
PassageList = Annotated[list[Any], list_of("passage")]
DocumentList = Annotated[list[Any], list_of("document")]
OneDocument = Annotated[dict[str, Any] | None, one("document")]
SourceList = Annotated[list[Any], list_of("source")]
OneSource = Annotated[dict[str, Any] | None, one("source")]
JobList = Annotated[list[Any], list_of("job")]
OneJob = Annotated[dict[str, Any] | None, one("job")]


def json_types(prop: dict[str, Any]) -> list[str]:
    """The JSON types a field's schema admits (an integer is a number: `number` covers both)."""
    variants = prop.get("anyOf", [prop])
    found = [t for v in variants for t in ([v["type"]] if isinstance(v.get("type"), str) else v.get("type", []))]
    types = list(dict.fromkeys(found))
    return [t for t in types if not (t == "integer" and "number" in types)]


def view_schema(view: type[BaseModel]) -> dict[str, Any]:
    """A view as a compact item schema: the names of its fields of each JSON type as one anchored
    alternation (`{"^(id|uri|title)$": {"type": "string"}}`), in the order the view declares them."""
    groups: dict[str, list[str]] = {}
    for name, prop in view.model_json_schema()["properties"].items():
        types = json_types(prop)
        groups.setdefault(json.dumps(types[0] if len(types) == 1 else types), []).append(name)
    patterns = {f"^({'|'.join(names)})$": {"type": json.loads(types)} for types, names in groups.items()}
    return {"patternProperties": patterns}


def with_views(prop: dict[str, Any], used: dict[str, None], views: frozenset[str]) -> dict[str, Any]:
    """A top-level property with its view (`{"$view": name}`, itself or as its items) as a `$ref` when
    the view is published (its name noted in `used`), else as the bare JSON type."""
    name = prop.get(VIEW_KEY) or prop.get("items", {}).get(VIEW_KEY)
    if name is None:
        return prop
    if name not in views:
        return {"type": "object"} if VIEW_KEY in prop else {"type": "array"}
    used[name] = None
    ref = {"$ref": f"#/$defs/{name}"}
    return ref if VIEW_KEY in prop else {"type": "array", "items": ref}


def view_keys(reply: type[BaseModel]) -> dict[str, str]:
    """{top-level key: view name} of a reply model (published or not): `results` -> `hit`."""
    props = reply.model_json_schema()["properties"].items()
    return {key: n for key, p in props if (n := p.get(VIEW_KEY) or p.get("items", {}).get(VIEW_KEY)) is not None}


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
    """An output schema with its keys in the published order (type, properties, required, $defs: the
    SDK's generator sorts keys, and `tools/list` stays byte for byte what agents have seen), each view
    it names once under `$defs`."""
    return published_with(schema, PUBLISHED_VIEWS)


def published_with(schema: dict[str, Any] | None, views: frozenset[str]) -> dict[str, Any] | None:
    """`published`, publishing exactly `views` (the tests measure what publishing more would cost)."""
    if schema is None:
        return None
    used: dict[str, None] = {}
    lean: dict[str, Any] = {key: schema[key] for key in ("type", "properties", "required") if key in schema}
    lean["properties"] = {name: with_views(p, used, views) for name, p in lean.get("properties", {}).items()}
    if used:
        lean["$defs"] = {name: view_schema(VIEWS[name]) for name in used}
    return lean


def strict_view_schema(name: str) -> dict[str, Any]:
    """A view's item schema admitting no other key: what the tool tests hold every live item to."""
    return {**view_schema(VIEWS[name]), "additionalProperties": False}


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
    results: HitList | None = None
    passages: PassageList | None = None
    count: int | None = None
    tokens_used: int | None = None
    answer: NullableText = None
    citations: JsonArray | None = None


class DocumentReply(Reply):
    document: OneDocument = None
    documents: DocumentList | None = None
    content: JsonObject | None = None
    outline: JsonObject | None = None
    chunk: JsonObject | None = None
    total_count: int | None = None


class SourceReply(Reply):
    source: OneSource = None
    sources: SourceList | None = None
    total_count: int | None = None


class CrawlReply(Reply):
    crawl_job: OneJob = None
    jobs: JobList | None = None
    total_count: int | None = None
