"""Flatten parameters into one vector and back (``torch.nn.utils.parameters_to_vector`` and its inverse)."""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.core.grad_mode import no_grad
from chainrule.core.tensor import Tensor
from chainrule.nn.utils._util import tensor_list

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Any) -> Tensor:
    """Concatenate the flattened ``parameters`` into one 1-D tensor (recorded: differentiable).

    >>> import chainrule as cr
    >>> cr.nn.utils.parameters_to_vector(cr.nn.Linear(3, 2).parameters()).shape
    (8,)
    """
    params = tensor_list(parameters, "parameters_to_vector")
    if not params:
        raise ValueError("parameters_to_vector: got no parameters; pass e.g. model.parameters() of a model "
                         "that has some")
    return ops.concatenate([ops.reshape(p, (-1,)) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Any) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into ``parameters`` in place (not recorded), in order.

    >>> import chainrule as cr
    >>> lin = cr.nn.Linear(2, 1); cr.nn.utils.vector_to_parameters(cr.arange(3.0), lin.parameters())
    >>> lin.weight, lin.bias
    (Parameter(tensor([[0., 1.]], requires_grad=True)), Parameter(tensor([2.], requires_grad=True)))
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected a cr.Tensor for vec, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise ShapeError(f"vector_to_parameters: vec must be 1-D, got shape {vec.shape}; flatten it "
                         f"(e.g. with parameters_to_vector)")
    params = tensor_list(parameters, "vector_to_parameters")
    total = sum(p.size for p in params)
    if vec.shape[0] != total:
        raise ShapeError(f"vector_to_parameters: vec has {vec.shape[0]} elements but the parameters "
                         f"(shapes {[p.shape for p in params]}) hold {total}")
    pointer = 0
    with no_grad():
        for p in params:
            n = p.size
            chunk = np.asarray(vec.data[pointer:pointer + n]).reshape(p.shape)
            np.copyto(p.data, chunk, casting="same_kind")
            p._bump()
            pointer += n
