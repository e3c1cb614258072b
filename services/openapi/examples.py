"""Examples of a parameter, a media type or a response, kept verbatim as fenced JSON blocks."""

from __future__ import annotations

from typing import Any

from services.openapi.resolve import SpecRefs
from services.openapi.schema import dump, one_line, schema_example

MAX_EXAMPLE_CHARS = 3000
MAX_EXAMPLES = 5


def example_block(value: Any, label: str = "Example") -> list[str]:
    """A labelled fenced block: strings as text, everything else as indented JSON (cut when huge)."""
    text = value if isinstance(value, str) else dump(value, indent=2, limit=MAX_EXAMPLE_CHARS)
    if len(text) > MAX_EXAMPLE_CHARS:
        text = text[:MAX_EXAMPLE_CHARS] + "\n… (example cut)"
    fence = "```" if isinstance(value, str) else "```json"
    return [f"{label}:", "", fence, text, "```", ""]


def media_examples(media: dict[str, Any], schema: Any, refs: SpecRefs) -> list[str]:
    """The examples of a 3.x media type (or parameter): `example`, named `examples`, else the schema's."""
    lines: list[str] = []
    if "example" in media:
        lines += example_block(media["example"])
    named = media.get("examples")
    if isinstance(named, dict):
        for name, raw in list(named.items())[:MAX_EXAMPLES]:
            example = refs.value(raw)
            if not isinstance(example, dict):
                continue
            summary = f" ({one_line(example['summary'], 120)})" if example.get("summary") else ""
            if "value" in example:
                lines += example_block(example["value"], f"Example `{name}`{summary}")
            elif example.get("externalValue"):
                lines += [f"Example `{name}`{summary}: {example['externalValue']}", ""]
    if not lines:
        target = refs.value(schema)
        found = schema_example(target) if isinstance(target, dict) else None
        if found is not None:
            lines += example_block(found)
    return lines


def swagger2_examples(response: dict[str, Any]) -> list[str]:
    """Swagger 2.0 response `examples`: a map of media type to example."""
    examples = response.get("examples")
    if not isinstance(examples, dict):
        return []
    lines: list[str] = []
    for media, value in list(examples.items())[:MAX_EXAMPLES]:
        lines += example_block(value, f"Example ({media})")
    return lines
