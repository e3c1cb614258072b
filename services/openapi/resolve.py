"""`$ref` resolution inside one spec, through `referencing` (python-jsonschema's resolver).

The renderer walks schemas itself and asks `SpecRefs.follow` for each `$ref`; it keeps the chain of
references it is inside, so a recursive schema is expanded once and then marked, never infinitely.
References to other documents (`common.yaml#/Pet`, `https://...`) are not fetched: they are shown
by name and reported as unresolved. Every `follow` is one schema node visited, counted on the spec's
meter (the "openapi" budget: per document, within the spec's wall time).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from referencing import Registry, Specification
from referencing.exceptions import Unresolvable

from services.core.budgets import Meter, budget

logger = logging.getLogger(__name__)

SPEC_URI = "urn:archivist:spec"


@dataclass(frozen=True)
class Followed:
    """What a node is after following its `$ref` chain."""

    node: Any  # the target (the node itself when it has no $ref); None when unresolvable
    ref: str | None  # the last reference followed, e.g. "#/components/schemas/Pet"
    error: str | None = None  # why the reference could not be followed


def ref_name(ref: str) -> str:
    """The short name of a reference: "#/components/schemas/Pet" -> "Pet"."""
    return ref.rstrip("/").rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~") or ref


class SpecRefs:
    """Follows local `$ref`s of one spec (JSON pointers, `$id`-free)."""

    #: A chain of refs pointing at refs longer than this is treated as broken.
    MAX_CHAIN = budget("openapi").depth

    def __init__(self, spec: dict[str, Any], meter: Meter | None = None) -> None:
        resource = Specification.OPAQUE.create_resource(spec)
        self._resolver = Registry().with_resource(SPEC_URI, resource).resolver(base_uri=SPEC_URI)
        self.unresolved: set[str] = set()
        self.meter = meter or budget("openapi").meter()
        self._targets: dict[str, Any] = {}  # ref -> its target: a pointer is resolved once per spec

    def follow(self, node: Any) -> Followed:
        """Follow `node`'s `$ref` (and a target that is itself a `$ref`) to a concrete node."""
        self.meter.tick()
        ref: str | None = None
        for _ in range(self.MAX_CHAIN):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return Followed(node, ref)
            ref = node["$ref"]
            if ref in self._targets:
                node = self._targets[ref]
                continue
            if ref in self.unresolved:
                return Followed(None, ref, "external or missing reference, not resolved")
            try:
                node = self._targets[ref] = self._resolver.lookup(ref).contents
            except Unresolvable as exc:
                self.unresolved.add(ref)
                logger.debug("unresolved $ref %s: %s", ref, exc)
                return Followed(None, ref, "external or missing reference, not resolved")
        return Followed(None, ref, "reference chain too long")

    def value(self, node: Any) -> Any:
        """The concrete node behind `node` (None when its reference cannot be followed)."""
        return self.follow(node).node
