"""YAML under a budget: composed by libyaml, counted on the node graph, built into Python only after.

An alias is a second reference to a node, so composing never expands anything; what expands is the use
of the result. A chain of aliases (nine levels of ten, a few hundred bytes) composes into a few dozen
nodes but reads as 10^9 values to anything that walks it: rendering it as JSON, `str()`, or PyYAML's own
merge keys (`<<: *base`), which copy every pair while the Python values are built. So the composed
graph is walked once, iteratively, before anything is built: each node counted once, each alias adding
the full expanded size of what it points at (memoised, so the walk is linear in the nodes), cycles and
nesting past the budget's depth refused. Only a document within budget is constructed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from services.core.budgets import Budget, Meter, budget

#: libyaml's C loader when present (about 10x faster; its parser caps nesting at 1,000 levels).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _children(node: Node) -> Iterator[Node]:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif not isinstance(node, ScalarNode):
        yield from node.value


def check_graph(root: Node, nodes: Meter, aliases: Budget) -> None:
    """Count `root`'s distinct nodes on `nodes`; refuse what aliases add past `aliases.structure`
    (nodes plus scalar characters of everything an alias stands for), cycles, and depth past
    `nodes.budget.depth`. Iterative: no recursion on hostile nesting."""
    size: dict[int, int] = {}  # expanded size of each finished node
    open_nodes: set[int] = set()  # the nodes on the current path (an alias to one is a cycle)
    added = 0
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            own = len(node.value) if isinstance(node, ScalarNode) else 0
            size[key] = 1 + own + sum(size[id(child)] for child in _children(node))
            continue
        if key in size:  # a second reference: an alias
            added += size[key]
            if added > aliases.structure:
                raise aliases.over(f"its aliases expand to more than {aliases.structure:,} nodes and characters")
            continue
        if key in open_nodes:
            raise aliases.over("an alias refers to a node that contains it (a recursive structure)")
        nodes.tick()
        open_nodes.add(key)
        if len(open_nodes) > nodes.budget.depth:
            raise nodes.budget.over(f"nested deeper than {nodes.budget.depth} levels")
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(list(_children(node))))


def compose_all(text: str, limits: Budget) -> int:
    """Compose every document of `text` and check each within `limits` (nodes, depth) and the alias
    budget; the number of documents. yaml.YAMLError on bad syntax."""
    loader = LOADER(text)
    nodes, documents = limits.meter(), 0
    try:
        while loader.check_node():
            node = loader.get_node()
            assert node is not None  # check_node() said one follows
            check_graph(node, nodes, budget("yaml-aliases"))
            documents += 1
    finally:
        loader.dispose()
    return documents


def load_one(text: str, limits: Budget) -> Any:
    """The single document of `text` as Python values, built only once its graph is within budget."""
    loader = LOADER(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        check_graph(root, limits.meter("YAML nodes"), budget("yaml-aliases"))
        return loader.construct_document(root)
    finally:
        loader.dispose()
