"""Neural-network primitives kept as primitives for stability: softmax, log_softmax.

relu, sigmoid, softplus and gelu are elementwise primitives (see elementwise.py).
"""
from __future__ import annotations

from typing import Any

from .._backend import np
from ._registry import apply, defprim, raw
from ._shapes import normalize_axis


def _softmax_forward(x: Any, axis: int) -> Any:
    z = np.exp(x - np.amax(x, axis=axis, keepdims=True))
    return z / np.sum(z, axis=axis, keepdims=True)


def _log_softmax_forward(x: Any, axis: int) -> Any:
    shifted = x - np.amax(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


# matches torch.nn.functional.softmax / log_softmax
SOFTMAX = defprim("softmax", _softmax_forward,
                  vjps=(lambda g, out, x, axis: out * (g - sum(g * out, axis=axis, keepdims=True)),),
                  jvps=(lambda t, out, x, axis: out * (t - sum(t * out, axis=axis, keepdims=True)),),
                  saves="out", flops=lambda out, x, axis: 4 * int(np.size(out)), kind="softmax")
LOG_SOFTMAX = defprim("log_softmax", _log_softmax_forward,
                      vjps=(lambda g, out, x, axis: g - exp(out) * sum(g, axis=axis, keepdims=True),),
                      jvps=(lambda t, out, x, axis: t - sum(exp(out) * t, axis=axis, keepdims=True),),
                      saves="out", flops=lambda out, x, axis: 4 * int(np.size(out)), kind="softmax")


def softmax(x: Any, axis: int = -1) -> Any:
    """Softmax along ``axis`` (numerically stable).

    >>> import chainrule as cr
    >>> cr.softmax(cr.tensor([0.0, 0.0]))
    tensor([0.5, 0.5])
    """
    axis = normalize_axis(axis, np.ndim(raw(x)),
                          "softmax")[0]
    return apply(SOFTMAX, (x,), {"axis": axis})


def log_softmax(x: Any, axis: int = -1) -> Any:
    """Log of the softmax along ``axis``, computed without forming the softmax."""
    axis = normalize_axis(axis, np.ndim(raw(x)),
                          "log_softmax")[0]
    return apply(LOG_SOFTMAX, (x,), {"axis": axis})


from .elementwise import exp  # noqa: E402
from .reduction import sum  # noqa: E402
