"""Weight initialisers (in place, never recorded), seeded through a ``numpy.random.Generator``.

Formulas follow ``torch.nn.init`` (He et al. 2015 for Kaiming, Glorot & Bengio 2010 for Xavier).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.core.random import get_generator
from chainrule.core.tensor import Tensor

__all__ = ["calculate_gain", "fans", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_", "uniform_",
           "xavier_normal_", "xavier_uniform_", "zeros_"]

_GAINS = {"linear": 1.0, "conv2d": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
          "selu": 0.75}


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """Recommended gain for a nonlinearity (``leaky_relu`` takes the negative slope as ``param``).

    >>> import chainrule as cr
    >>> round(cr.nn.init.calculate_gain("relu"), 4)
    1.4142
    """
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope * slope))
    if nonlinearity not in _GAINS:
        raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}; use one of "
                         f"{sorted(_GAINS) + ['leaky_relu']}")
    return _GAINS[nonlinearity]


def fans(shape: tuple) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight of ``shape`` = (out, in, *kernel).

    >>> import chainrule as cr
    >>> cr.nn.init.fans((16, 3, 5, 5))
    (75, 400)
    """
    if len(shape) < 2:
        raise ShapeError(f"init: fan_in/fan_out need a weight with at least 2 dimensions, got {shape}")
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _no_op(t: Tensor) -> bool:
    """True, with PyTorch's warning, when ``t`` has no element: initialising it does nothing."""
    if math.prod(t.shape):
        return False
    warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
    return True


def _default_bound(weight_shape: tuple) -> float:
    """The bound ``b`` of PyTorch's default U(-b, b) for a Linear's or a convolution's weight and bias
    (its ``kaiming_uniform_(a=sqrt(5))``): ``1 / sqrt(fan_in)``; 0 when there is no input (fan_in 0,
    torch's bias bound then). A zero-element weight warns, as torch's (its draw is a no-op).

    >>> import chainrule as cr
    >>> cr.nn.init._default_bound((3, 4)), cr.nn.init._default_bound((16, 3, 5, 5)) == 1 / 75 ** 0.5
    (0.5, True)
    """
    if not math.prod(weight_shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
    fan_in = fans(tuple(weight_shape))[0]
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


def _fill(t: Tensor, values: Any) -> Tensor:
    t.data[...] = values
    t._bump()
    return t


def uniform_(t: Tensor, low: float = 0.0, high: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with U(low, high).

    >>> import chainrule as cr, numpy as np
    >>> w = cr.nn.init.uniform_(cr.zeros(1000), 2.0, 3.0, generator=np.random.default_rng(0))
    >>> bool(w.data.min() >= 2.0 and w.data.max() < 3.0), round(float(w.data.mean()), 1)
    (True, 2.5)
    """
    return _fill(t, get_generator(generator).uniform(low, high, t.shape))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with N(mean, std²).

    >>> import chainrule as cr, numpy as np
    >>> w = cr.nn.init.normal_(cr.zeros(10000), 1.0, 0.5, generator=np.random.default_rng(0))
    >>> round(float(w.data.mean()), 1), round(float(w.data.std()), 1)
    (1.0, 0.5)
    """
    return _fill(t, get_generator(generator).normal(mean, std, t.shape))


def zeros_(t: Tensor) -> Tensor:
    """Fill with zeros.

    >>> import chainrule as cr
    >>> cr.nn.init.zeros_(cr.ones(2))
    tensor([0., 0.])
    """
    return _fill(t, 0)


def ones_(t: Tensor) -> Tensor:
    """Fill with ones.

    >>> import chainrule as cr
    >>> cr.nn.init.ones_(cr.zeros(2))
    tensor([1., 1.])
    """
    return _fill(t, 1)


def _kaiming_std(t: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fans(t.shape)[0 if mode == "fan_in" else 1]
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator: Any = None) -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan); a zero-element ``t`` is left, with a warning.

    >>> import chainrule as cr, numpy as np
    >>> w = cr.nn.init.kaiming_uniform_(cr.zeros((64, 100)), generator=np.random.default_rng(0))
    >>> bool(np.abs(w.data).max() <= np.sqrt(6 / 100))
    True
    """
    if _no_op(t):
        return t
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity)
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator: Any = None) -> Tensor:
    """He normal: N(0, (gain / sqrt(fan))²); a zero-element ``t`` is left, with a warning.

    >>> import chainrule as cr, numpy as np
    >>> w = cr.nn.init.kaiming_normal_(cr.zeros((200, 50)), nonlinearity="relu",
    ...                                generator=np.random.default_rng(0))
    >>> round(float(w.data.std()), 2)                 # sqrt(2 / 50)
    0.2
    """
    if _no_op(t):
        return t
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity), generator)


def xavier_uniform_(t: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Glorot uniform: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).

    >>> import chainrule as cr, numpy as np
    >>> w = cr.nn.init.xavier_uniform_(cr.zeros((30, 20)), generator=np.random.default_rng(0))
    >>> bool(np.abs(w.data).max() <= np.sqrt(6 / 50)), round(float(np.abs(w.data).max()), 2)
    (True, 0.35)
    """
    fan_in, fan_out = fans(t.shape)
    if not fan_in + fan_out and _no_op(t):            # (0, 0): torch divides by zero
        return t
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(t: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Glorot normal: N(0, gain² * 2 / (fan_in + fan_out)).

    >>> import chainrule as cr, numpy as np
    >>> w = cr.nn.init.xavier_normal_(cr.zeros((200, 300)), generator=np.random.default_rng(0))
    >>> round(float(w.data.std()), 2)
    0.06
    """
    fan_in, fan_out = fans(t.shape)
    if not fan_in + fan_out and _no_op(t):
        return t
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)
