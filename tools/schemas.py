"""Published tool definitions: the reply models whose JSON schema is each tool's `outputSchema`, and the
compact form of input schemas.

Every reply is `{"success": true, ...}` or the error contract, so each reply model is one object with
`success` required and the tool's own top-level keys (others allowed: `extra="allow"`). The error fields
(error, error_code, retryable, suggestion) are the same for every tool: the server's instructions name
them once, rather than four output schemas repeating them in `tools/list`. For the same reason the
published schemas list `success` as required without repeating its type: it is `true` in every reply
an output schema describes (the SDK checks successful replies only) and the instructions name it.

A reply model publishes its schema compact (`Reply.__get_pydantic_json_schema__`): no titles, no
defaults, an optional field as its plain type. The SDK derives `outputSchema` from the model named in a
tool's return annotation (`Annotated[CallToolResult, SearchReply]`) and checks each successful reply's
structured content against it: the schema is built once, from the model, through the SDK's public API.

List items are described by their views (models/views.py) in the most compact form that still names
each field and its JSON type: the field names of each type as one anchored alternation
(`patternProperties`; an integer is published as a number), written where a reply first holds the view
and referred to after (`crawl_job` in full, `jobs` as `{"$ref": "#/properties/crawl_job"}`). One
`properties` entry per field would cost about three times the characters. Items allow other keys (no
`additionalProperties: false`): a shaper's extra key must never turn a reply into an SDK error; the
tool tests check every live item against the full views strictly (tests/tools/test_typed_replies.py).

`tools/list` holds 7,000 characters, and every view in full would make it about 8,900
(tests/tools/test_typed_replies.py prints the figure), so PUBLISHED_VIEWS names what agents
act on first: a passage of `max_tokens` in full, and of a hit what HIT_CORE guarantees whatever a
profile selects (cite it, read on, its flags) plus its rank, the title and `metadata.url` the skill
cites with, and `char_start`, the offset to read on from. The other views are published as bare
arrays and objects; publishing one is an entry here and a snapshot update.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from models.views import DocumentView, HitView, JobView, PassageView, SourceView
from services.access.profile_settings import HIT_CORE

#: the views items are described by, by name
VIEWS: dict[str, type[BaseModel]] = {
    "source": SourceView,
    "document": DocumentView,
    "job": JobView,
    "hit": HitView,
    "passage": PassageView,
}
#: where a reply model names a view (tools/schemas.published turns it into the view's schema or a `$ref`)
VIEW_KEY = "$view"
#: views to publish, each with the fields `tools/list` names (None: every field of the view)
Published = Mapping[str, Sequence[str] | None]
#: what an agent acts on in a hit: HIT_CORE, its rank, what it cites with, the offset it reads on from
HIT_PUBLISHED = (*HIT_CORE, "score", "document_title", "metadata", "char_start")
#: the views `tools/list` publishes (see the module docstring for why these)
PUBLISHED_VIEWS: Published = {"passage": None, "hit": HIT_PUBLISHED}

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


def item_type(prop: dict[str, Any]) -> str | list[str]:
    """A field's JSON type as a view publishes it: an integer as a number (JSON has one number type;
    a separate integer group would cost a pattern of its own), one type bare, several as a list."""
    types = list(dict.fromkeys("number" if t == "integer" else t for t in json_types(prop)))
    return types[0] if len(types) == 1 else types


def names_pattern(names: list[str]) -> str:
    """The anchored alternation naming exactly `names` (`^(id|uri)$`; a lone name `^id$`)."""
    return f"^{names[0]}$" if len(names) == 1 else f"^({'|'.join(names)})$"


def view_schema(view: type[BaseModel], fields: Sequence[str] | None = None) -> dict[str, Any]:
    """A view as a compact item schema: the names of its fields of each JSON type as one anchored
    alternation (`{"^(id|uri|title)$": {"type": "string"}}`), in the order the view declares them;
    `fields` keeps only those (None: every field)."""
    groups: dict[str, list[str]] = {}
    for name, prop in view.model_json_schema()["properties"].items():
        if fields is None or name in fields:
            groups.setdefault(json.dumps(item_type(prop)), []).append(name)
    patterns = {names_pattern(names): {"type": json.loads(types)} for types, names in groups.items()}
    return {"patternProperties": patterns}


def with_views(prop: dict[str, Any], key: str, seen: dict[str, str], views: Published) -> dict[str, Any]:
    """A top-level property with its view (`{"$view": name}`, itself or as its items): a published view
    in full where the reply first names it (`seen` notes where), a `$ref` to that place after (a reply's
    one document and its list of documents share one description); an unpublished one as its bare
    JSON type."""
    name = prop.get(VIEW_KEY) or prop.get("items", {}).get(VIEW_KEY)
    if name is None:
        return prop
    single = VIEW_KEY in prop
    if name not in views:
        return {"type": "object"} if single else {"type": "array"}
    if name in seen:
        return {"$ref": seen[name]} if single else {"type": "array", "items": {"$ref": seen[name]}}
    seen[name] = f"#/properties/{key}" + ("" if single else "/items")
    described = view_schema(VIEWS[name], views[name])
    return {"type": "object", **described} if single else {"type": "array", "items": described}


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
    """An output schema with its keys in the published order (type, properties, required: the SDK's
    generator sorts keys, and `tools/list` stays byte for byte what agents have seen), each published
    view described where the reply first names it."""
    return published_with(schema, PUBLISHED_VIEWS)


def published_with(schema: dict[str, Any] | None, views: Published) -> dict[str, Any] | None:
    """`published`, publishing exactly `views` (the tests measure what publishing more would cost)."""
    if schema is None:
        return None
    seen: dict[str, str] = {}
    lean: dict[str, Any] = {key: schema[key] for key in ("type", "properties", "required") if key in schema}
    properties = {key: p for key, p in lean.get("properties", {}).items() if key != "success"}
    lean["properties"] = {key: with_views(p, key, seen, views) for key, p in properties.items()}
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
