"""Pytrees: nested tuples, lists and dicts whose leaves are arrays, Tensors or numbers.

The transforms flatten their arguments and results to a list of leaves, work on the leaves, and
rebuild the same structure. Dicts keep their insertion order.

>>> leaves, tree = flatten({"w": 1.0, "b": (2.0, 3.0)})
>>> leaves
[1.0, 2.0, 3.0]
>>> unflatten(tree, [10, 20, 30])
{'w': 10, 'b': (20, 30)}
"""
from __future__ import annotations

from typing import Any, Callable

LEAF = None          # the structure of a single leaf


def flatten(tree: Any) -> tuple[list, Any]:
    """Return (leaves, structure); ``unflatten(structure, leaves)`` rebuilds the tree."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree: Any, leaves: list) -> Any:
    if isinstance(tree, dict):
        return (dict, tuple(tree), tuple(_flatten(v, leaves) for v in tree.values()))
    if isinstance(tree, (tuple, list)):
        return (type(tree), len(tree), tuple(_flatten(v, leaves) for v in tree))
    leaves.append(tree)
    return LEAF


def unflatten(structure: Any, leaves: list) -> Any:
    """Rebuild a tree of the given structure from its leaves (in flatten's order)."""
    it = iter(leaves)
    return _unflatten(structure, it)


def _unflatten(structure: Any, it: Any) -> Any:
    if structure is LEAF:
        return next(it)
    kind, keys, children = structure
    values = [_unflatten(c, it) for c in children]
    if kind is dict:
        return dict(zip(keys, values))
    if kind is list:
        return values
    if kind is tuple:
        return tuple(values)
    return kind(*values)        # a namedtuple


def paths(structure: Any) -> list[tuple]:
    """The key path of every leaf, in flatten's order: ``(0, 'w')`` for ``tree[0]['w']``."""
    out: list[tuple] = []
    stack = [(structure, ())]
    while stack:
        node, path = stack.pop()
        if node is LEAF:
            out.append(path)
            continue
        kind, keys, children = node
        names = keys if kind is dict else range(keys)
        for key, child in reversed(list(zip(names, children))):
            stack.append((child, path + (key,)))
    return out


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """Apply ``fn`` to every leaf and keep the structure."""
    leaves, structure = flatten(tree)
    return unflatten(structure, [fn(x) for x in leaves])
