"""Graph-level autograd API: ``cr.autograd.grad``, ``cr.autograd.backward`` and
``cr.autograd.queue_callback``."""
from __future__ import annotations

from typing import Any

from chainrule.autograd.engine import backward as _backward
from chainrule.autograd.engine import grad, queue_callback
from chainrule.core.tensor import Tensor


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs: Any = None) -> None:
    """Accumulate gradients of ``tensors`` into the leaves' ``.grad`` (``Tensor.backward`` for many)."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if grad_tensors is not None and isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    _backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


__all__ = ["grad", "backward", "queue_callback"]
