"""Neural-network primitives kept as primitives for stability: softmax, log_softmax.

relu, sigmoid, softplus and gelu are elementwise primitives (see elementwise.py). On 16-bit and FP8
inputs these ops run in float32 and round once (``_dtypes.accumulate``), as PyTorch's kernels do.
"""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import LOW_PRECISION, accumulate
from chainrule.core._registry import apply, defprim, raw, real_only
from chainrule.core.tensor import Tensor
from chainrule.ops._batching import Batch, batch_axes, expand, set_batch
from chainrule.ops._batching import reshape as _breshape
from chainrule.ops.elementwise import exp
from chainrule.ops.reduction import _along, sum
from chainrule.ops.shape import expand_dims


def _shifted(x: Any, axis: int) -> Any:
    try:
        return x - np.maximum.reduce(x, axis=axis, keepdims=True)
    except ValueError:                  # no elements, no maximum: the results are empty (PyTorch's)
        return x


def _softmax_forward(x: Any, axis: int) -> Any:
    z = np.exp(_shifted(x, axis))
    return z / np.add.reduce(z, axis=axis, keepdims=True)


def _log_softmax_forward(x: Any, axis: int) -> Any:
    shifted = _shifted(x, axis)
    if not x.size:                      # nothing to normalise (and the log of an empty sum warns)
        return shifted
    return shifted - np.log(np.add.reduce(np.exp(shifted), axis=axis, keepdims=True))


# matches torch.nn.functional.softmax / log_softmax; softmax's Jacobian diag(p) - p p^T is
# symmetric, so one rule serves both modes
SOFTMAX = defprim("softmax", _softmax_forward,
                  rules=(lambda g, out, x, axis: out * (g - sum(g * out, axis=axis, keepdims=True)),),
                  saves="out", flops=lambda out, x, axis: 4 * int(np.size(out)), kind="softmax",
                  accumulate=True, autocast="float32")
LOG_SOFTMAX = defprim("log_softmax", _log_softmax_forward,
                      vjps=(lambda g, out, x, axis: g - exp(out) * sum(g, axis=axis, keepdims=True),),
                      jvps=(lambda t, out, x, axis: t - sum(exp(out) * t, axis=axis, keepdims=True),),
                      saves="out", flops=lambda out, x, axis: 4 * int(np.size(out)), kind="softmax",
                      accumulate=True, autocast="float32")


def _softmax_cross_entropy_forward(x: Any, target: Any, reduction: str = "none") -> Any:
    real_only("softmax_cross_entropy", x)
    shifted = _shifted(x, -1)
    lse = np.log(np.add.reduce(np.exp(shifted), axis=-1))
    loss = lse - shifted[np.arange(len(target)), target]
    if reduction == "none":
        return loss
    total = np.add.reduce(loss)
    return np.asarray(total / len(target) if reduction == "mean" else total, dtype=loss.dtype)


def _onehot(target: Any, like: Any) -> Any:
    data = raw(like)
    out = np.zeros(data.shape, dtype=data.dtype)
    out[np.arange(len(target)), target] = 1
    return out


def _dloss_dlogits(x: Any, target: Any) -> Any:
    return softmax(x, axis=-1) - _onehot(target, x)


def _softmax_cross_entropy_vjp(g: Any, out: Any, x: Any, target: Any, reduction: str = "none") -> Any:
    scale = g / len(target) if reduction == "mean" else g          # () or, for "none", (N,)
    if type(x) is ndarray and type(g) is ndarray:   # a plain backward: in place on a fresh softmax
        p = _softmax_forward(x, -1)
        p[np.arange(len(target)), target] -= 1
        p *= scale[..., None] if reduction == "none" else scale
        return p
    return _dloss_dlogits(x, target) * (expand_dims(scale, -1) if reduction == "none" else scale)


def _softmax_cross_entropy_jvp(t: Any, out: Any, x: Any, target: Any, reduction: str = "none") -> Any:
    per_example = sum(t * _dloss_dlogits(x, target), axis=-1)
    if reduction == "none":
        return per_example
    return sum(per_example) / len(target) if reduction == "mean" else sum(per_example)


# Fused for speed (one node instead of log_softmax, indexing, negation and the mean): cross-entropy
# of logits (N, C) against integer targets (N,), per example or reduced ("mean", "sum");
# d/dlogits = softmax - onehot.
SOFTMAX_CROSS_ENTROPY = defprim(
    "softmax_cross_entropy", _softmax_cross_entropy_forward,
    vjps=(_softmax_cross_entropy_vjp,), jvps=(_softmax_cross_entropy_jvp,),
    saves="x", flops=lambda out, x, target, reduction="none": 5 * int(np.size(x)), kind="softmax",
    accumulate=True, autocast="float32")
REDUCTIONS = ("none", "mean", "sum")


def _batched(t: Any) -> bool:
    return isinstance(t, Tensor) and bool(t._level)


def _flat_targets(t: Any, size: int) -> Any:
    """The batch's targets as one vector, (B * N,): batched ones (``Batch``) as they are, the
    others repeated for every example."""
    if isinstance(t, Batch):
        t = t.value
    elif _batched(t):                       # batched at an outer level: its ops dispatch there
        t = expand(t, size)
    else:
        t = np.broadcast_to(raw(t), (size,) + np.shape(raw(t)))
    return _breshape(t, (-1,)) if _batched(t) else np.reshape(raw(t), -1)


def _batch_cross_entropy(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    # the examples' rows stacked into one (B * N, C) problem; the reduction then per example
    x = xs[0] if batched[0] else expand(xs[0], size)
    n, c = np.shape(x)[1:]
    flat = apply(prim, (_breshape(x, (size * n, c)),), {"target": _flat_targets(params["target"], size),
                                                         "reduction": "none"})
    loss = _breshape(flat, (size, n))
    if params["reduction"] == "none":
        return loss
    total = sum(loss, axis=1)
    return total / n if params["reduction"] == "mean" else total


set_batch(SOFTMAX, batch_axes("axis"))
set_batch(LOG_SOFTMAX, batch_axes("axis"))
set_batch(SOFTMAX_CROSS_ENTROPY, _batch_cross_entropy)


def softmax_cross_entropy(logits: Any, target: Any, reduction: str = "none") -> Any:
    """Cross-entropy ``logsumexp(logits) - logits[target]`` of (N, C) logits and integer targets
    (N,), per example (``reduction="none"``) or its "mean" or "sum", computed stably as one
    primitive (``cr.nn.functional.cross_entropy``'s plain case).

    >>> import chainrule as cr
    >>> cr.numpy.softmax_cross_entropy(cr.tensor([[0.0, 0.0]]), [1])
    tensor([0.6931472])
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"softmax_cross_entropy: reduction must be 'none', 'mean' or 'sum', got "
                         f"{reduction!r}")
    if getattr(logits, "dtype", None) in LOW_PRECISION:
        return accumulate(softmax_cross_entropy, logits, target, reduction)
    target = target if _batched(target) else np.asarray(raw(target))
    return apply(SOFTMAX_CROSS_ENTROPY, (logits,), {"target": target, "reduction": reduction})


def softmax(x: Any, axis: int = -1) -> Any:
    """Softmax along ``axis`` (numerically stable).

    >>> import chainrule as cr
    >>> cr.softmax(cr.tensor([0.0, 0.0]))
    tensor([0.5, 0.5])
    """
    return _along(x, SOFTMAX, axis)


def log_softmax(x: Any, axis: int = -1) -> Any:
    """Log of the softmax along ``axis``, computed without forming the softmax.

    >>> import chainrule as cr
    >>> cr.log_softmax(cr.tensor([0.0, 0.0]))
    tensor([-0.6931472, -0.6931472])
    """
    return _along(x, LOG_SOFTMAX, axis)
