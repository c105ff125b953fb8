"""Checks on a schema's references, made once when a tool is registered.

jsonschema resolves ``$ref`` lazily, while it validates: a reference to nothing raised out of
``validate``, and a schema that refers to itself without descending into the value
(``{"$ref": "#"}`` at its root) recursed until Python's stack ran out, on every call. Here every
reference is resolved up front and the subschemas that apply to one and the same value form a
graph that must have no cycle and a bounded size; both problems become an ``InvalidToolsError``
naming the tool and the JSON Pointer of the reference.

What this leaves to validation time is recursion that does descend (a tree schema whose
``children`` items refer back to the root): its cost grows with the arguments, and
`toolcodec.schema.budget` keeps it linear in them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import referencing.jsonschema
from jsonschema_specifications import REGISTRY as META_SCHEMAS

# Keywords whose subschemas apply to the same value as the schema holding them.
_SAME_ONE = ("not", "if", "then", "else")
_SAME_LIST = ("allOf", "anyOf", "oneOf")
_SAME_MAP = ("dependentSchemas", "dependencies")  # draft-07's dependencies: schema values only
# Keywords whose subschemas apply to a part of the value (an item, a property, a key).
_PART_ONE = ("items", "additionalItems", "contains", "propertyNames", "additionalProperties",
             "unevaluatedItems", "unevaluatedProperties")
_PART_LIST = ("prefixItems", "items")  # items as a list: draft-07 tuples
_PART_MAP = ("properties", "patternProperties")
# Schemas kept for reference only: never applied unless a reference points at them.
_DEFINITIONS = ("$defs", "definitions")
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")

# At most this many keywords may apply to one value (counting every path through shared
# definitions): a schema past it costs too much to evaluate on every call.
MAX_KEYWORDS_PER_VALUE = 20_000


class SchemaRefError(ValueError):
    """A reference does not resolve, loops without descending, or fans out too far."""


@dataclass
class _Node:
    """One subschema (a dict) of the schema: where it is and what applies with it."""

    pointer: str
    schema: dict
    resolver: Any
    keywords: int
    same: list[int] = field(default_factory=list)  # ids of subschemas on the same value
    refs: list[tuple[str, str]] = field(default_factory=list)  # (keyword, reference)


def keywords_per_value(schema: Any, dialect: str) -> int:
    """Check every reference in *schema*; return how many keywords apply to one value at most.

    *dialect* is the meta-schema URI of the draft the schema is read as. Raises
    `SchemaRefError` (its message names the pointer of the reference) when a reference does
    not resolve, does not point at a schema, closes a loop on the same value, or the
    subschemas applying to one value exceed `MAX_KEYWORDS_PER_VALUE`.
    """
    if not isinstance(schema, dict):
        return 1
    spec = referencing.jsonschema.specification_with(dialect,
                                                     default=referencing.jsonschema.DRAFT202012)
    root = spec.create_resource(schema)
    nodes: dict[int, _Node] = {}
    inside = _containers(schema)
    pending = [(schema, "", META_SCHEMAS.resolver_with_root(root))]
    while pending:
        for node in _walk(pending.pop(), spec, nodes):
            for keyword, ref in node.refs:
                target = _resolve(node, keyword, ref, nodes, inside)
                if target is not None:
                    pending.append(target)
    _check_cycles(nodes)
    return _widest(nodes)


def _containers(schema: Any) -> set[int]:
    """The ids of every dict and list inside *schema*: a reference landing on one of them
    lands inside the tool's own schema (else in a meta-schema of the registry)."""
    seen: set[int] = set()
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.values() if isinstance(item, dict) else item)
    return seen


def _walk(start: tuple[dict, str, Any], spec: Any, nodes: dict[int, _Node]) -> list[_Node]:
    """Record *start* and every subschema under it not seen yet, and return them (iteratively:
    schemas may nest deeply)."""
    new: list[_Node] = []
    stack = [start]
    while stack:
        schema, pointer, resolver = stack.pop()
        if id(schema) in nodes:
            continue
        resolver = resolver.in_subresource(spec.create_resource(schema))
        node = _Node(pointer, schema, resolver, len(schema))
        nodes[id(schema)] = node
        new.append(node)
        for key, value in schema.items():
            if key in _REFS and isinstance(value, str):
                node.refs.append((key, value))
            for sub, where in _subschemas(key, value, f"{pointer}/{_escape(key)}"):
                stack.append((sub, where, resolver))
                if key in _SAME_ONE or key in _SAME_LIST or key in _SAME_MAP:
                    node.same.append(id(sub))
    return new


def _subschemas(key: str, value: Any, pointer: str) -> list[tuple[dict, str]]:
    """The dict subschemas a keyword holds, with their pointers (booleans hold no refs)."""
    if isinstance(value, list) and (key in _SAME_LIST or key in _PART_LIST):
        items = [(v, f"{pointer}/{i}") for i, v in enumerate(value)]
    elif key in _SAME_ONE or key in _PART_ONE:
        items = [(value, pointer)]
    elif key in _SAME_MAP or key in _PART_MAP or key in _DEFINITIONS:
        items = [(v, f"{pointer}/{_escape(str(k))}") for k, v in value.items()] if isinstance(
            value, dict) else []
    else:
        items = []
    return [(v, p) for v, p in items if isinstance(v, dict)]


def _resolve(node: _Node, keyword: str, ref: str, nodes: dict[int, _Node],
             inside: set[int]) -> tuple[dict, str, Any] | None:
    """Resolve one reference of *node*, adding the edge; a target not yet walked is returned."""
    where = f"{keyword!r} at '{node.pointer or '/'}'"
    try:
        resolved = node.resolver.lookup(ref)
    except Exception as exc:  # noqa: BLE001 - Unresolvable, or a URI urllib cannot take apart
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise SchemaRefError(f"{where}: {ref!r:.80} does not resolve ({reason:.120})") from None
    target = resolved.contents
    if isinstance(target, bool):
        return None
    if not isinstance(target, dict):
        raise SchemaRefError(f"{where}: {ref!r:.80} points at {type(target).__name__}, "
                             "not at a schema")
    node.same.append(id(target))
    if id(target) in nodes or id(target) not in inside:
        return None  # already walked, or a meta-schema of the registry: finite and known
    return target, f"{node.pointer}/{keyword}→{ref:.60}", resolved.resolver


def _check_cycles(nodes: dict[int, _Node]) -> None:
    """Raise when subschemas applying to the same value reach themselves again."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in nodes:
        if start in state:
            continue
        path = [(start, iter(nodes[start].same))]
        state[start] = 1
        while path:
            current, children = path[-1]
            child = next(children, None)
            if child is None:
                state[current] = 2
                path.pop()
            elif child in nodes and state.get(child) == 1:
                raise SchemaRefError(_loop_message(nodes, [p for p, _ in path], child))
            elif child in nodes and child not in state:
                state[child] = 1
                path.append((child, iter(nodes[child].same)))


def _loop_message(nodes: dict[int, _Node], path: list[int], back_to: int) -> str:
    """Name the last reference on the loop (a loop always passes through one)."""
    loop = [nodes[i] for i in path[path.index(back_to):]]
    for node in reversed(loop):
        keyword = next((k for k in _REFS if isinstance(node.schema.get(k), str)), None)
        if keyword is not None:
            ref = node.schema[keyword]
            return (f"{keyword!r} at '{node.pointer or '/'}' ({ref!r:.60}) leads back to "
                    f"'{loop[0].pointer or '/'}' without descending into the value: "
                    "checking any value would never end")
    return f"the subschemas at '{loop[0].pointer or '/'}' apply to themselves"


def _widest(nodes: dict[int, _Node]) -> int:
    """The most keywords that apply to one value, over every subschema (the graph is acyclic)."""
    total: dict[int, int] = {}
    for start in nodes:
        stack = [start]
        while stack:
            current = stack[-1]
            if current in total:
                stack.pop()
                continue
            missing = [c for c in nodes[current].same if c in nodes and c not in total]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            count = nodes[current].keywords + sum(total.get(c, 1) for c in nodes[current].same)
            total[current] = min(count, MAX_KEYWORDS_PER_VALUE + 1)
            if count > MAX_KEYWORDS_PER_VALUE:
                raise SchemaRefError(
                    f"the subschemas at '{nodes[current].pointer or '/'}' apply more than "
                    f"{MAX_KEYWORDS_PER_VALUE} keywords to one value (through shared "
                    "definitions): too costly to check on every call")
    return max(total.values(), default=1)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
