"""OpenAPI 3.0/3.1 and Swagger 2.0 specifications as documents: one per operation, plus an overview.

load.py recognises and parses a spec, resolve.py follows its `$ref`s (with `referencing`),
operations.py lists its operations, schema.py / examples.py / render.py / overview.py write markdown.
`convert_spec` is pure and CPU-bound, and a spec is outside content: `convert_spec_text` (load and
convert) runs in the limited parser pool under the "openapi" budget (services/core/budgets.py: schema nodes
visited per document, output characters, wall time). Storing the documents is services.documents' job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from services.core.budgets import budget
from services.core.errors import OverBudget
from services.openapi.load import SPEC_MEDIA_TYPES, load_spec, load_spec_if_any, might_be_spec, spec_version
from services.openapi.operations import iter_operations
from services.openapi.overview import api_title, api_version, overview_title, render_overview
from services.openapi.render import OperationRenderer
from services.openapi.resolve import SpecRefs

__all__ = [
    "OVERVIEW_FRAGMENT",
    "SPEC_MEDIA_TYPES",
    "SpecDocument",
    "convert_spec",
    "convert_spec_text",
    "load_spec",
    "load_spec_if_any",
    "might_be_spec",
    "spec_version",
]

logger = logging.getLogger(__name__)

OVERVIEW_FRAGMENT = "overview"


@dataclass
class SpecDocument:
    """One document made from a spec."""

    title: str
    markdown: str
    fragment: str  # appended to the spec's URL after '#': "overview", "get-/pets/{id}"
    metadata: dict[str, Any] = field(default_factory=dict)


def convert_spec(spec: dict[str, Any]) -> list[SpecDocument]:
    """The overview document, then one document per operation (in the spec's order). OverBudget when
    one document follows more schema nodes than the budget allows, when the documents together pass its
    output characters, or when converting takes longer than its wall time."""
    limits = budget("openapi")
    refs = SpecRefs(spec, limits.meter())
    operations = iter_operations(spec, refs)
    common = {
        "openapi_version": spec_version(spec),
        "api_title": api_title(spec),
        **({"api_version": api_version(spec)} if api_version(spec) else {}),
    }
    documents = [
        SpecDocument(
            overview_title(spec),
            render_overview(spec, operations, refs),
            OVERVIEW_FRAGMENT,
            {**common, "openapi_kind": "overview", "operations": len(operations)},
        )
    ]
    renderer = OperationRenderer(spec, refs, untagged=api_title(spec))
    written = len(documents[0].markdown)
    for operation in operations:
        refs.meter.restart()
        metadata = {
            **common,
            "openapi_kind": "operation",
            "method": operation.method.upper(),
            "path": operation.path,
            "tags": operation.tags,
            **({"operation_id": operation.operation_id} if operation.operation_id else {}),
            **({"deprecated": True} if operation.node.get("deprecated") is True else {}),
        }
        try:
            markdown = renderer.render(operation)
        except OverBudget as exc:
            raise OverBudget(f"{operation.title[:200]}: {exc.message}", exc.suggestion, budget=exc.budget) from None
        written += len(markdown)
        limits.check_output(written, "the documents of the spec")
        documents.append(SpecDocument(operation.title, markdown, operation.fragment, metadata))
    if refs.unresolved:
        logger.info("%s: %d $refs not resolved (external or missing)", api_title(spec), len(refs.unresolved))
        documents[0].metadata["unresolved_refs"] = sorted(refs.unresolved)[:20]
    return documents


def convert_spec_text(text: str, name: str) -> list[SpecDocument] | None:
    """Load `text` and convert it when it is a spec, else None. For the parser pool: runs where the
    spec's budget can cost a worker, never the server."""
    spec = load_spec_if_any(text, name)
    return None if spec is None else convert_spec(spec)
