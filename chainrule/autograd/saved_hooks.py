"""Saved-tensor hooks: decide how the graph stores what it saves for backward (PyTorch's API).

Every value a primitive saves goes through the innermost active ``pack`` when it is saved, and the
graph keeps only what ``pack`` returned; backward calls ``unpack`` on it once per use.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

from chainrule.core import _dtypes
from chainrule.core._backend import np
from chainrule.core.grad_mode import add_to, remove_from
from chainrule.core.tensor import Tensor


class saved_tensors_hooks:
    """Context manager: ``pack(tensor) -> anything`` at save time, ``unpack(that) -> tensor`` in backward.

    Nested blocks: the innermost pair wins.

    >>> import chainrule as cr
    >>> calls = []
    >>> x = cr.tensor([1.0, 2.0], requires_grad=True)
    >>> with cr.saved_tensors_hooks(lambda t: calls.append("pack") or t, lambda t: t):
    ...     y = cr.exp(x)
    >>> y.sum().backward(); calls, x.grad
    (['pack'], tensor([2.718282 , 7.3890557]))
    """

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]) -> None:
        if not (callable(pack_hook) and callable(unpack_hook)):
            raise TypeError(f"saved_tensors_hooks: pack_hook and unpack_hook must be callables, got "
                            f"{type(pack_hook).__name__} and {type(unpack_hook).__name__}")
        self.pair = (pack_hook, unpack_hook)

    def __enter__(self) -> saved_tensors_hooks:
        add_to("hooks", self.pair)
        return self

    def __exit__(self, *exc: object) -> None:
        remove_from("hooks", self.pair)


def save_as(dtype: Any) -> saved_tensors_hooks:
    """Hooks that store saved floating arrays in ``dtype`` (float16, bfloat16) and restore their dtype.

    Halves activation memory for float32 models at the cost of rounding the saved values. Each array
    is copied once however many ops save it; parameters (leaves that require grad) are kept as they are.

    >>> import chainrule as cr
    >>> x = cr.tensor([0.1, 0.2], dtype=cr.float32, requires_grad=True)
    >>> with cr.save_as(cr.float16):
    ...     h = x * 1.0                # an activation: saved as float16 by the next op
    ...     y = (h * h).sum()
    >>> y.backward(); x.grad           # 2 * float16(x): rounded to float16 precision
    tensor([0.19995117, 0.39990234])
    """
    target = np.dtype(dtype)
    if not _dtypes.is_floating(target):
        raise TypeError(f"save_as: dtype must be a floating dtype such as cr.float16 or cr.bfloat16, "
                        f"got {target}")

    copies: dict = {}      # id(array) -> (array ref, copy ref): one copy per array, however often saved

    def pack(t: Tensor) -> Any:
        data = t.data
        if t.is_leaf and t.requires_grad or data.dtype.kind == "c" \
                or not _dtypes.is_floating(data.dtype) or data.dtype.itemsize <= target.itemsize:
            return data     # a parameter (alive anyway), complex, an integer mask, or already small
        hit = copies.get(id(data))
        if hit is not None and hit[0]() is data and hit[1]() is not None:
            return hit[1](), data.dtype
        small = data.astype(target)
        key = id(data)
        copies[key] = (weakref.ref(data, lambda _: copies.pop(key, None)), weakref.ref(small))
        return small, data.dtype

    def unpack(packed: Any) -> Any:
        if isinstance(packed, tuple):
            data, original = packed
            return data.astype(original)
        return packed

    return saved_tensors_hooks(pack, unpack)
