"""Pytrees, as ``torch.utils._pytree`` (the part ``torch.func`` uses): nested tuples, lists,
dicts (``OrderedDict``, ``defaultdict`` too) and namedtuples are *nodes*; anything else,
Tensors and ``None`` included, is a *leaf*. :func:`tree_flatten` gives the leaves in order
(a dict's in its key order) and a :class:`TreeSpec` that :func:`tree_unflatten` rebuilds
the structure from.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any

__all__ = ["TreeSpec", "broadcast_to_and_flatten", "tree_flatten", "tree_leaves", "tree_map",
           "tree_unflatten"]


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _node_type(x: Any) -> type | None:
    """The node type of ``x`` (its class for a pytree node), None for a leaf."""
    if _is_namedtuple(x):
        return type(x)
    for kind in (OrderedDict, defaultdict, dict, list, tuple):  # (subclasses first)
        if type(x) is kind:
            return kind
    return None


def _children(x: Any, kind: type) -> tuple[list[Any], Any]:
    """``(children, context)`` of node ``x``: a dict's values and its keys (and a
    defaultdict's factory), a sequence's items."""
    if issubclass(kind, dict):
        keys = list(x.keys())
        context = (x.default_factory, keys) if kind is defaultdict else keys
        return [x[k] for k in keys], context
    return list(x), None


def _rebuild(kind: type, context: Any, children: list[Any]) -> Any:
    if kind is defaultdict:
        factory, keys = context
        return defaultdict(factory, zip(keys, children))
    if issubclass(kind, dict):
        return kind(zip(context, children))
    if kind is list:
        return list(children)
    if kind is tuple:
        return tuple(children)
    return kind(*children)  # a namedtuple


class TreeSpec:
    """The structure of a pytree: its node type, context (a dict's keys) and children's specs;
    a leaf's spec is ``*`` (``TreeSpec.LEAF``). Specs compare equal when the structures are
    the same (the same types, keys in the same order, leaves in the same places)."""

    __slots__ = ("type", "context", "children", "num_leaves")

    def __init__(self, kind: type | None, context: Any, children: list[TreeSpec]) -> None:
        self.type, self.context, self.children = kind, context, children
        self.num_leaves = 1 if kind is None else sum(c.num_leaves for c in children)

    def is_leaf(self) -> bool:
        return self.type is None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TreeSpec) and self.type is other.type
                and self.context == other.context and self.children == other.children)

    def __hash__(self) -> int:
        return hash((self.type, len(self.children)))

    def __repr__(self, indent: int = 0) -> str:
        """PyTorch's form: ``*`` for a leaf, ``TreeSpec(tuple, None, [*, *])`` for a node."""
        if self.type is None:
            return "*"
        context = self.context if not isinstance(self.context, tuple) else self.context[1]
        inner = f",\n{' ' * (indent + 2)}".join(c.__repr__(indent + 2) for c in self.children)
        return f"TreeSpec({self.type.__name__}, {context}, [{inner}])"


LEAF = TreeSpec(None, None, [])
TreeSpec.LEAF = LEAF  # type: ignore[attr-defined]


def tree_flatten(tree: Any) -> tuple[list[Any], TreeSpec]:
    """The leaves of ``tree`` in order, and its structure."""
    leaves: list[Any] = []

    def flatten(x: Any) -> TreeSpec:
        kind = _node_type(x)
        if kind is None:
            leaves.append(x)
            return LEAF
        children, context = _children(x, kind)
        return TreeSpec(kind, context, [flatten(c) for c in children])

    return leaves, flatten(tree)


def tree_leaves(tree: Any) -> list[Any]:
    return tree_flatten(tree)[0]


def tree_unflatten(leaves: list[Any] | tuple[Any, ...], spec: TreeSpec) -> Any:
    """The pytree of structure ``spec`` with ``leaves`` (as many as it has) in order."""
    leaves = list(leaves)
    if len(leaves) != spec.num_leaves:
        raise ValueError(f"tree_unflatten(leaves, treespec): `leaves` has length {len(leaves)} "
                         f"but the spec refers to a pytree that holds {spec.num_leaves} items "
                         f"({spec}).")
    position = iter(leaves)

    def build(s: TreeSpec) -> Any:
        if s.type is None:
            return next(position)
        return _rebuild(s.type, s.context, [build(c) for c in s.children])

    return build(spec)


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``tree`` with ``fn`` applied to each leaf."""
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_to_and_flatten(prefix: Any, spec: TreeSpec) -> list[Any] | None:
    """``prefix`` (a pytree whose structure is a prefix of ``spec``'s: a leaf of it stands for
    the whole subtree there) as one value per leaf of ``spec``; None where the structures do
    not match (PyTorch's ``_broadcast_to_and_flatten``: ``vmap``'s ``in_dims``/``out_dims``)."""
    out: list[Any] = []

    def walk(p: Any, s: TreeSpec) -> bool:
        kind = _node_type(p)
        if kind is None:
            out.extend([p] * s.num_leaves)
            return True
        if kind is not s.type:
            return False
        children, context = _children(p, kind)
        if issubclass(kind, dict):
            keys = context[1] if kind is defaultdict else context
            spec_keys = s.context[1] if kind is defaultdict else s.context
            if set(keys) != set(spec_keys):
                return False
            by_key = dict(zip(keys, children))
            return all(walk(by_key[k], c) for k, c in zip(spec_keys, s.children))
        if len(children) != len(s.children):
            return False
        return all(walk(c, cs) for c, cs in zip(children, s.children))

    return out if walk(prefix, spec) else None
