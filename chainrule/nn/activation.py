"""Activation layers, as ``torch.nn``'s: thin Modules over ``chainrule.nn.functional.activation``.

``inplace`` is accepted where PyTorch has it (for its signature); the result is always a new tensor.
"""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._dtypes import get_default_dtype
from chainrule.core.errors import ShapeError
from chainrule.nn._common import _FunctionalLayer
from chainrule.nn.functional import activation as A
from chainrule.nn.module import Module, Parameter
from chainrule.numpy import raw

__all__ = ["ELU", "GLU", "SELU", "Hardswish", "Hardtanh", "LeakyReLU", "LogSoftmax", "Mish", "PReLU", "ReLU6",
           "SiLU", "Softmax", "Softplus", "Softsign"]


class _Elementwise(_FunctionalLayer):
    """A functional layer with PyTorch's ``inplace`` flag: shown last in the repr, when set."""

    def __init__(self, inplace: bool = False, **arguments: Any) -> None:
        super().__init__(**arguments)
        self.inplace = inplace

    def extra_repr(self) -> str:
        parts = [super().extra_repr()] if self._arguments else []
        return ", ".join(parts + ["inplace=True"] * bool(self.inplace))


class LeakyReLU(_Elementwise):
    """``x`` where ``x > 0``, else ``negative_slope * x``.

    >>> import chainrule as cr
    >>> cr.nn.LeakyReLU(0.1)(cr.tensor([-1.0, 2.0]))
    tensor([-0.1,  2. ])
    """

    fn = staticmethod(A.leaky_relu)

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(inplace, negative_slope=negative_slope)


class ELU(_Elementwise):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``.

    >>> import chainrule as cr
    >>> cr.nn.ELU()(cr.tensor([1.0]))
    tensor([1.])
    """

    fn = staticmethod(A.elu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace, alpha=alpha)


class SELU(_Elementwise):
    """The self-normalising ``scale * elu(x, alpha)``, PyTorch's constants.

    >>> import chainrule as cr
    >>> cr.nn.SELU()(cr.tensor([0.0]))
    tensor([0.])
    """

    fn = staticmethod(A.selu)


class SiLU(_Elementwise):
    """``x * sigmoid(x)``.

    >>> import chainrule as cr
    >>> cr.nn.SiLU()(cr.tensor([0.0]))
    tensor([0.])
    """

    fn = staticmethod(A.silu)


class Mish(_Elementwise):
    """``x * tanh(softplus(x))``.

    >>> import chainrule as cr
    >>> cr.nn.Mish()(cr.tensor([0.0]))
    tensor([0.])
    """

    fn = staticmethod(A.mish)


class Softplus(_FunctionalLayer):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``.

    >>> import chainrule as cr
    >>> cr.nn.Softplus(beta=2.0, threshold=10.0)(cr.tensor([20.0]))
    tensor([20.])
    """

    fn = staticmethod(A.softplus)

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(beta=beta, threshold=threshold)


class Softsign(_FunctionalLayer):
    """``x / (1 + |x|)``.

    >>> import chainrule as cr
    >>> cr.nn.Softsign()(cr.tensor([1.0]))
    tensor([0.5])
    """

    fn = staticmethod(A.softsign)


class Hardtanh(_Elementwise):
    """Clip to ``[min_val, max_val]``.

    >>> import chainrule as cr
    >>> cr.nn.Hardtanh(-2.0, 2.0)(cr.tensor([-5.0, 1.0, 5.0]))
    tensor([-2.,  1.,  2.])
    """

    fn = staticmethod(A.hardtanh)

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val={min_val} is above max_val={max_val}; pass min_val <= max_val")
        super().__init__(inplace, min_val=min_val, max_val=max_val)


class ReLU6(_Elementwise):
    """``min(max(x, 0), 6)``.

    >>> import chainrule as cr
    >>> cr.nn.ReLU6()(cr.tensor([-1.0, 7.0]))
    tensor([0., 6.])
    """

    fn = staticmethod(A.relu6)


class Hardswish(_Elementwise):
    """``x * relu6(x + 3) / 6``.

    >>> import chainrule as cr
    >>> cr.nn.Hardswish()(cr.tensor([3.0]))
    tensor([3.])
    """

    fn = staticmethod(A.hardswish)


class PReLU(Module):
    """``x`` where ``x > 0``, else ``weight * x``, with a learned ``weight`` of ``num_parameters`` entries
    (1, or one per channel on axis 1), each initialised to ``init`` as PyTorch.

    >>> import chainrule as cr
    >>> m = cr.nn.PReLU(); list(m.state_dict()), m(cr.tensor([-4.0])).tolist()
    (['weight'], [-1.0])
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype: Any = None) -> None:
        super().__init__()
        if int(num_parameters) < 1:
            raise ValueError(f"PReLU: num_parameters must be at least 1, got {num_parameters}")
        self.num_parameters, self.init = int(num_parameters), init
        self.weight = Parameter(np.full((self.num_parameters,), init, dtype=dtype or get_default_dtype()))

    def forward(self, input: Any) -> Any:
        shape = np.shape(raw(input))
        if self.num_parameters != 1 and (len(shape) < 2 or shape[1] != self.num_parameters):
            raise ShapeError(f"PReLU: num_parameters={self.num_parameters} needs input with that many "
                             f"channels on axis 1, got shape {tuple(shape)}; build PReLU("
                             f"{shape[1] if len(shape) >= 2 else 1})")
        return A.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


def _softmax_dim(dim: Any, ndim: int) -> int:
    # PyTorch's implicit choice for dim=None (deprecated there): 0 for 0-, 1- and 3-d input, else 1
    if dim is not None:
        return dim
    return 0 if ndim in (0, 1, 3) else 1


class _SoftmaxBase(Module):
    fn = staticmethod(ops.softmax)

    def __init__(self, dim: Any = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:
        shape = np.shape(raw(input))
        dim = _softmax_dim(self.dim, len(shape))
        if not shape:
            return self.fn(ops.reshape(input, (1,)), axis=0)[0]
        if not -len(shape) <= dim < len(shape):
            raise ShapeError(f"{type(self).__name__}: dim={dim} is out of range for input of shape "
                             f"{tuple(shape)}; pass dim in [{-len(shape)}, {len(shape) - 1}]")
        return self.fn(input, axis=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """Softmax along ``dim`` (``None``: PyTorch's implicit choice, axis 0 for 0-, 1- and 3-d input, else 1).

    >>> import chainrule as cr
    >>> cr.nn.Softmax(dim=-1)(cr.tensor([[0.0, 0.0]]))
    tensor([[0.5, 0.5]])
    """

    fn = staticmethod(ops.softmax)


class LogSoftmax(_SoftmaxBase):
    """Log-softmax along ``dim`` (``None`` as Softmax).

    >>> import chainrule as cr
    >>> cr.nn.LogSoftmax(dim=1)(cr.tensor([[0.0, 0.0]])).round(4)
    tensor([[-0.6931, -0.6931]])
    """

    fn = staticmethod(ops.log_softmax)


class GLU(_FunctionalLayer):
    """The gated linear unit: ``a * sigmoid(b)`` for the halves ``a, b`` of ``dim``.

    >>> import chainrule as cr
    >>> cr.nn.GLU()(cr.ones((2, 6))).shape
    (2, 3)
    """

    fn = staticmethod(A.glu)

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim=dim)
