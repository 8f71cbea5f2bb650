"""Shape arithmetic shared by the ops (no ops here): normalise axes, reduced and broadcast shapes."""
from __future__ import annotations

from operator import index
from typing import Any

from chainrule.core.errors import ShapeError


def normalize_axis(axis: Any, ndim: int, op: str = "op") -> tuple[int, ...] | None:
    """Return ``axis`` as a sorted tuple of non-negative ints (None stays None)."""
    if axis is None:
        return None
    try:
        axes = (axis,) if isinstance(axis, int) or hasattr(axis, "__index__") else tuple(axis)
        out = []
        for a in axes:
            a = index(a)
            if not -ndim <= a < max(ndim, 1):
                raise ShapeError(f"{op}: axis {a} is out of bounds for an array of dimension {ndim}")
            out.append(a % ndim if ndim else 0)
    except TypeError:                   # 1.0, "1", (0, 1.0): not ints (ShapeError is no TypeError)
        raise ShapeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r} "
                         f"({type(axis).__name__}); {_axis_fix(axis)}") from None
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(out))


def _axis_fix(axis: Any) -> str:
    """``pass axis=1`` for 1.0 (``axis=(0, 1)`` for (0, 1.0)); a generic hint when no int is meant."""
    many = isinstance(axis, (tuple, list))
    items = tuple(axis) if many else (axis,)
    try:
        ints = tuple(int(a) for a in items)
    except (TypeError, ValueError):
        ints = None
    if ints is None or ints != items:
        return "pass an int such as axis=0, a tuple such as axis=(0, 1), or None for all axes"
    return f"pass axis={ints if many else ints[0]}"


def reduced_shape(shape: tuple[int, ...], axis: tuple[int, ...] | None) -> tuple[int, ...]:
    """``shape`` with the reduced axes kept as size 1 (the keepdims=True shape)."""
    if axis is None:
        return (1,) * len(shape)
    return tuple(1 if i in axis else n for i, n in enumerate(shape))


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast result shape (raises ShapeError naming the shapes)."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ShapeError(f"shapes {', '.join(map(str, shapes))} cannot be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Does ``shape`` broadcast to ``target`` (without growing it)?

    >>> broadcasts_to((1, 3), (2, 3)), broadcasts_to((2, 3), (3,))
    (True, False)
    """
    try:
        return broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ShapeError:
        return False
