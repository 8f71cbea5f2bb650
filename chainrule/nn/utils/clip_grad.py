"""Gradient clipping (``torch.nn.utils.clip_grad_norm_`` and friends): in place on ``.grad``, unrecorded."""
from __future__ import annotations

import math
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._dtypes import get_default_dtype
from chainrule.core.grad_mode import no_grad
from chainrule.core.tensor import Tensor
from chainrule.nn.utils._util import tensor_list

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _norm_type(norm_type: Any, who: str) -> float:
    p = float(norm_type)
    if math.isnan(p):
        raise ValueError(f"{who}: norm_type must be a number or inf, got {norm_type!r}")
    return p


@no_grad()
def get_total_norm(tensors: Any, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: Any = None) -> Tensor:
    """The ``norm_type`` norm of the norms of ``tensors``: the norm of all of them as one vector.

    >>> import chainrule as cr
    >>> cr.nn.utils.get_total_norm([cr.tensor([3.0]), cr.tensor([4.0])])
    tensor(5.)
    """
    p = _norm_type(norm_type, "get_total_norm")
    tensors = tensor_list(tensors, "get_total_norm")
    if not tensors:
        return Tensor(np.zeros((), dtype=get_default_dtype()))
    norms = [ops.linalg.vector_norm(t, ord=p) for t in tensors]
    total = ops.linalg.vector_norm(ops.stack(norms), ord=p)
    if error_if_nonfinite and not bool(ops.isfinite(total)):
        raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is non-finite "
                           f"({float(total)}), so it cannot be clipped. To disable this error and scale the "
                           f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


@no_grad()
def clip_grads_with_norm_(parameters: Any, max_norm: float, total_norm: Any, foreach: Any = None) -> None:
    """Scale every ``.grad`` in place by ``min(1, max_norm / (total_norm + 1e-6))``.

    >>> import chainrule as cr
    >>> p = cr.nn.Parameter([3.0, 4.0]); p.grad = cr.tensor([3.0, 4.0])
    >>> cr.nn.utils.clip_grads_with_norm_([p], 1.0, cr.tensor(5.0)); p.grad.round(4)
    tensor([0.6, 0.8])
    """
    params = tensor_list(parameters, "clip_grads_with_norm_")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    total = total_norm if isinstance(total_norm, Tensor) else Tensor(total_norm)
    coef = ops.minimum(float(max_norm) / (total + 1e-6), 1.0)
    with np.errstate(invalid="ignore"):              # inf * 0 is nan, as torch's, without a warning
        for g in grads:
            g *= coef.astype(g.dtype)


@no_grad()
def clip_grad_norm_(parameters: Any, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: Any = None) -> Tensor:
    """Clip the gradients of ``parameters`` in place so that their total ``norm_type`` norm (one norm over
    all of them) is at most ``max_norm``; returns the total norm before clipping, as a tensor.

    The gradients are multiplied by ``min(1, max_norm / (total + 1e-6))``, as PyTorch. ``foreach`` is
    accepted and ignored (there is one implementation).

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0, 1.0]); w.grad = cr.tensor([3.0, 4.0])
    >>> cr.nn.utils.clip_grad_norm_([w], max_norm=1.0), w.grad.round(4)
    (tensor(5.), tensor([0.6, 0.8]))
    """
    params = tensor_list(parameters, "clip_grad_norm_")
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


@no_grad()
def clip_grad_value_(parameters: Any, clip_value: float, foreach: Any = None) -> None:
    """Clamp every ``.grad`` of ``parameters`` in place to ``[-clip_value, clip_value]``.

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0, 1.0]); w.grad = cr.tensor([-3.0, 0.5])
    >>> cr.nn.utils.clip_grad_value_([w], 1.0); w.grad
    tensor([-1. ,  0.5])
    """
    v = float(clip_value)
    if v < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be non-negative, got {clip_value}")
    for p in tensor_list(parameters, "clip_grad_value_"):
        if p.grad is not None:
            p.grad._assign(ops.clip(p.grad, -v, v), "clip_grad_value_")


