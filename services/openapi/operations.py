"""The operations of a spec, one per (method, path), normalised across Swagger 2.0 and OpenAPI 3.x.

Path-level parameters are merged into each operation (the operation's own win on the same name and
location); Swagger 2.0's `body` and `formData` parameters become the request body, as in 3.x.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.openapi.resolve import SpecRefs

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
BODY_LOCATIONS = frozenset({"body", "formData"})


@dataclass
class Operation:
    """One operation of the spec, its `$ref`ed parameters already followed."""

    method: str  # lower-case
    path: str
    node: dict[str, Any]  # the operation object
    parameters: list[dict[str, Any]] = field(default_factory=list)  # query, path, header, cookie
    body_parameters: list[dict[str, Any]] = field(default_factory=list)  # Swagger 2.0 body / formData

    @property
    def tags(self) -> list[str]:
        return [str(tag) for tag in self.node.get("tags") or []]

    @property
    def summary(self) -> str:
        return " ".join(str(self.node.get("summary") or "").split())

    @property
    def operation_id(self) -> str | None:
        value = self.node.get("operationId")
        return str(value) if value else None

    @property
    def fragment(self) -> str:
        """The document's URL fragment: "get-/pets/{id}" (stable while method and path are)."""
        return f"{self.method}-{self.path}"

    @property
    def title(self) -> str:
        head = f"{self.method.upper()} {self.path}"
        return f"{head} — {self.summary}" if self.summary else head


def is_swagger2(spec: dict[str, Any]) -> bool:
    return "swagger" in spec and "openapi" not in spec


def iter_operations(spec: dict[str, Any], refs: SpecRefs) -> list[Operation]:
    """Every operation, in the spec's order of paths and methods, then 3.1 webhooks ("webhook:newPet")."""
    operations: list[Operation] = []
    items = list((spec.get("paths") or {}).items())
    webhooks = spec.get("webhooks")
    if isinstance(webhooks, dict):
        items += [(f"webhook:{name}", item) for name, item in webhooks.items()]
    for path, item in items:
        path_item = refs.value(item)
        if not isinstance(path_item, dict):
            continue
        shared = _parameters(path_item.get("parameters"), refs)
        for method in METHODS:
            node = path_item.get(method)
            if isinstance(node, dict):
                operations.append(_operation(method, str(path), node, shared, refs))
    return operations


def _operation(method: str, path: str, node: dict[str, Any], shared: list[dict[str, Any]], refs: SpecRefs) -> Operation:
    own = _parameters(node.get("parameters"), refs)
    keys = {(p.get("name"), p.get("in")) for p in own}
    merged = [p for p in shared if (p.get("name"), p.get("in")) not in keys] + own
    return Operation(
        method=method,
        path=path,
        node=node,
        parameters=[p for p in merged if p.get("in") not in BODY_LOCATIONS],
        body_parameters=[p for p in merged if p.get("in") in BODY_LOCATIONS],
    )


def _parameters(raw: Any, refs: SpecRefs) -> list[dict[str, Any]]:
    """Parameter objects with their `$ref`s followed (unresolvable ones dropped)."""
    if not isinstance(raw, list):
        return []
    found = (refs.value(parameter) for parameter in raw)
    return [parameter for parameter in found if isinstance(parameter, dict)]


def media_types(spec: dict[str, Any], node: dict[str, Any], key: str) -> list[str]:
    """Swagger 2.0 `consumes` / `produces` of an operation (else the spec's), default JSON."""
    values = node.get(key) or spec.get(key) or ["application/json"]
    return [str(value) for value in values]
