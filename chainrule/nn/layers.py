"""Layers: small Modules over ``cr.nn.functional``. Initialisation follows PyTorch's defaults."""
from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Iterable

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._dtypes import get_default_dtype
from chainrule.nn import functional as F
from chainrule.nn import init
from chainrule.nn.containers import _abs_index, _ModuleSequence, _pop
from chainrule.nn.module import Module, Parameter


def _uniform_param(shape: tuple, bound: float, dtype: Any, generator: Any) -> Parameter:
    p = Parameter(np.zeros(shape, dtype=dtype or get_default_dtype()))
    return init.uniform_(p, -bound, bound, generator)


class Linear(Module):
    """``y = x @ weight.T + bias``; weight and bias drawn from U(-1/sqrt(in), 1/sqrt(in)) as PyTorch.

    >>> import chainrule as cr
    >>> cr.nn.Linear(4, 3)(cr.ones((2, 4))).shape
    (2, 3)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: Any = None,
                 generator: Any = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = init._default_bound((out_features, in_features))
        self.weight = _uniform_param((out_features, in_features), bound, dtype, generator)
        self.bias = _uniform_param((out_features,), bound, dtype, generator) if bias else None

    def forward(self, x: Any) -> Any:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _Activation(Module):
    fn = staticmethod(ops.relu)

    def forward(self, x: Any) -> Any:
        return self.fn(x)


class ReLU(_Activation):
    """max(x, 0) elementwise.

    >>> import chainrule as cr
    >>> cr.nn.ReLU()(cr.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    fn = staticmethod(ops.relu)


class Tanh(_Activation):
    """tanh elementwise."""

    fn = staticmethod(ops.tanh)


class Sigmoid(_Activation):
    """The logistic function elementwise."""

    fn = staticmethod(ops.sigmoid)


class GELU(Module):
    """Gaussian error linear unit: the exact erf form (PyTorch's default) or ``approximate="tanh"``.

    >>> import chainrule as cr
    >>> cr.nn.GELU()(cr.tensor([0.0]))
    tensor([0.])
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Any) -> Any:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Flatten(Module):
    """Flatten axes ``start_axis``..``end_axis`` (default: all but the batch axis).

    >>> import chainrule as cr
    >>> cr.nn.Flatten()(cr.ones((2, 3, 4))).shape
    (2, 12)
    """

    def __init__(self, start_axis: int = 1, end_axis: int = -1) -> None:
        super().__init__()
        self.start_axis, self.end_axis = start_axis, end_axis

    def forward(self, x: Any) -> Any:
        return ops.flatten(x, self.start_axis, self.end_axis)


class Dropout(Module):
    """Dropout with probability ``p`` while training; the identity in eval mode.

    >>> import chainrule as cr, numpy as np
    >>> d = cr.nn.Dropout(0.5, generator=np.random.default_rng(0)).eval()
    >>> d(cr.ones(3))
    tensor([1., 1., 1.])
    """

    def __init__(self, p: float = 0.5, generator: Any = None) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p, self.generator = p, generator

    def forward(self, x: Any) -> Any:
        return F.dropout(x, self.p, self.training, self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LayerNorm(Module):
    """Normalize the trailing ``normalized_shape`` axes, then scale and shift (learned).

    >>> import chainrule as cr
    >>> cr.nn.LayerNorm(2)(cr.tensor([[1.0, 3.0]])).round(3)
    tensor([[-1.,  1.]], grad_fn=<RoundBackward>)
    """

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True,
                 dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if np.ndim(normalized_shape) == 0 else tuple(normalized_shape)
        self.normalized_shape, self.eps = tuple(int(n) for n in shape), eps
        dtype = dtype or get_default_dtype()
        self.weight = Parameter(np.ones(self.normalized_shape, dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype)) if elementwise_affine else None

    def forward(self, x: Any) -> Any:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors, initialised from N(0, 1) as PyTorch.

    >>> import chainrule as cr
    >>> cr.nn.Embedding(10, 3)(cr.tensor([[1, 2], [3, 4]])).shape
    (2, 2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: Any = None,
                 generator: Any = None) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(np.zeros((num_embeddings, embedding_dim), dtype or get_default_dtype()))
        init.normal_(self.weight, generator=generator)

    def forward(self, indices: Any) -> Any:
        return F.embedding(indices, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Sequential(_ModuleSequence):
    """Apply modules in order, as ``torch.nn.Sequential``: built from modules (named ``"0"``, ``"1"``,
    ...) or from one ``OrderedDict`` of name -> module; indexed, sliced (a Sequential with the same
    names), iterated and changed like a list (``append``, ``extend``, ``insert``, ``pop``, ``del``,
    item assignment, ``+``, ``+=``, ``*``); deleting renumbers the names ``"0"``... as PyTorch does.

    >>> import chainrule as cr
    >>> net = cr.nn.Sequential(cr.nn.Linear(4, 8), cr.nn.ReLU(), cr.nn.Linear(8, 2))
    >>> net(cr.ones((5, 4))).shape, len(net), type(net[1]).__name__
    ((5, 2), 3, 'ReLU')
    >>> from collections import OrderedDict
    >>> named = cr.nn.Sequential(OrderedDict([("fc", cr.nn.Linear(2, 2)), ("act", cr.nn.Tanh())]))
    >>> list(named.state_dict()), type(named.pop(-1)).__name__, len(named + net)
    (['fc.weight', 'fc.bias'], 'Tanh', 4)
    """

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, m in args[0].items():
                self.add_module(key, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def _key(self, idx: int) -> str:
        if not hasattr(idx, "__index__"):
            raise TypeError(f"Sequential: index must be an int or a slice, got {type(idx).__name__} {idx!r}; "
                            f"reach a named module as an attribute (getattr(seq, name))")
        return list(self._modules)[int(_abs_index(self, idx))]

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):                # a Sequential with the same names, as PyTorch
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            delattr(self, key)
        self._renumber()

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise TypeError(f"Sequential + {type(other).__name__}: add a Sequential (wrap the modules in one)")
        return Sequential(*self, *other)

    def __iadd__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise TypeError(f"Sequential += {type(other).__name__}: add a Sequential (wrap the modules in one)")
        return self.extend(list(other))

    def __mul__(self, other: int) -> Sequential:
        if isinstance(other, bool) or not isinstance(other, int) or other <= 0:
            raise ValueError(f"Sequential * {other!r}: the multiplier must be a positive int")
        return Sequential(*(list(self) * other))

    __rmul__ = __mul__

    def __imul__(self, other: int) -> Sequential:
        repeated = self * other
        return self.extend(list(repeated)[len(self):])

    def append(self, module: Module) -> Sequential:
        """Append ``module`` at the end (named by its position); returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        """Append every module of an iterable; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert ``module`` before position ``index`` (``-len <= index <= len``); returns self."""
        if not isinstance(module, Module):
            raise TypeError(f"Sequential.insert: expected a Module, got {type(module).__name__}")
        n = len(self._modules)
        index = operator.index(index)
        if not -n <= index <= n:
            raise IndexError(f"Sequential.insert: index {index} is out of range for a Sequential of length {n}")
        index += n if index < 0 else 0
        items = list(self._modules.items())
        items.insert(index, (str(index), module))
        # numbered modules are renumbered by position, named ones keep their names
        object.__setattr__(self, "_modules", OrderedDict((str(i) if k.isdigit() else k, m)
                                                         for i, (k, m) in enumerate(items)))
        return self

    def pop(self, key: int | slice) -> Any:
        """Remove and return the module(s) at ``key``; the rest are renumbered."""
        return _pop(self, key)
