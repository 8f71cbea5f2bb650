"""The normalisation layers' functions: batch_norm, instance_norm, group_norm, rms_norm, as
``torch.nn.functional``'s.

All are composites of chainrule ops, so they differentiate to any order in both modes. The running
statistics (``batch_norm``'s and ``instance_norm``'s buffers) are updated in place from the batch's
values, outside the graph, as PyTorch does: normalisation uses the biased batch variance, the
running variance the unbiased one. 16-bit inputs are normalised in float32 and rounded back once,
under ``cr.autocast`` too (PyTorch's norms are on no autocast list: they return the input's dtype).
"""
from __future__ import annotations

import math
from typing import Any

from chainrule import numpy as ops
from chainrule.autograd.function import Function
from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, accum_dtype, is_floating
from chainrule.core.errors import DTypeError, ShapeError, VmapError
from chainrule.core.tensor import Tensor
from chainrule.distributed import collectives as dist
from chainrule.numpy import raw
from chainrule.ops.normalization import batch_norm_stats, batch_norm_train
from chainrule.ops.normalization import layer_norm as _layer_norm

__all__ = ["batch_norm", "group_norm", "instance_norm", "layer_norm", "rms_norm"]


# ----- helpers -----
def _shape(x: Any) -> tuple:
    """One example's shape under cr.vmap, the array's shape otherwise."""
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)


def _dtype(x: Any) -> Any:
    return x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype


def _check_input(x: Any, min_ndim: int, layout: str, who: str) -> tuple:
    shape = _shape(x)
    if not is_floating(_dtype(x)):
        raise DTypeError(f"{who}: input must be floating point, got dtype {_dtype(x)} with shape {shape}; "
                         f"convert it first (e.g. x.astype('float32'))")
    if len(shape) < min_ndim:
        raise ShapeError(f"{who}: expected input of shape {layout}, got {shape}; add the missing axes "
                         f"(e.g. x.reshape(1, *x.shape) for a batch of one)")
    return shape


def _check_channel_vector(v: Any, c: int, name: str, shape: tuple, who: str) -> None:
    if v is not None and _shape(v) != (c,):
        raise ShapeError(f"{who}: {name} must have one entry per channel, shape ({c},) for input {shape} "
                         f"(channels on axis 1), got {_shape(v)}; build it with num_features={c}")


def _check_stats_pair(running_mean: Any, running_var: Any, who: str) -> None:
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{who}: pass both running_mean and running_var, or neither (got only "
                         f"{'running_mean' if running_var is None else 'running_var'})")


def _check_momentum(momentum: Any, who: str) -> float:
    if momentum is None or isinstance(momentum, bool) or not isinstance(momentum, (int, float)):
        raise ValueError(f"{who}: momentum must be a number (running = (1 - momentum) * running + "
                         f"momentum * batch), got {momentum!r}; for a cumulative average pass "
                         f"1 / number_of_batches, or use the module with momentum=None")
    return float(momentum)


def _verify_values_per_channel(count: int, shape: tuple, who: str, what: str) -> None:
    if count == 1:
        raise ValueError(f"{who}: expected more than 1 value per {what} when training, got input of "
                         f"shape {shape}; use a larger batch (or eval mode, which uses the running "
                         f"statistics)")


def _along_channels(v: Any, ndim: int) -> Any:
    """(C,) -> (1, C, 1, ...): broadcasts along axis 1 of an ``ndim``-d input."""
    return ops.reshape(v, (1, -1) + (1,) * (ndim - 2))


def _in_accum(x: Any) -> tuple:
    """``x`` cast to its accumulation dtype (16-bit floats: float32) and the dtype to round back to."""
    dtype = _dtype(x)
    if dtype in LOW_PRECISION:
        return x.astype(accum_dtype(dtype)), dtype
    return x, None


def _round_back(out: Any, dtype: Any) -> Any:
    # also under autocast: PyTorch's norms are on no autocast list and return their input's dtype
    return out if dtype is None else out.astype(dtype)


def _normalize_with_stats(x: Any, axes: tuple, eps: float) -> tuple:
    """(x - mean) / sqrt(var + eps) over ``axes`` (biased variance), and the mean and variance."""
    mean = ops.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = ops.mean(centered * centered, axis=axes, keepdims=True)
    return centered / ops.sqrt(var + eps), mean, var


def _normalize_with_running(x: Any, running_mean: Any, running_var: Any, eps: float) -> Any:
    """(x - running_mean) / sqrt(running_var + eps): the buffers are constants (copied: a later update
    in place does not touch this graph), as PyTorch treats them."""
    ndim = len(_shape(x))
    dtype = _dtype(x)
    mean = np.array(raw(running_mean), dtype=dtype).reshape((1, -1) + (1,) * (ndim - 2))
    var = np.array(raw(running_var), dtype=dtype).reshape(mean.shape)
    return (x - mean) / np.sqrt(var + np.asarray(eps, dtype))


def _stat_value(stat: Any, who: str) -> Any:
    """The value of a batch statistic, outside the graph (a forward-mode tensor's primal)."""
    if isinstance(stat, Tensor) and stat._level:
        raise VmapError(f"{who}: updating running_mean/running_var in place inside cr.vmap would mix "
                        f"the examples' statistics; pass running_mean=None and running_var=None (for a "
                        f"model: cr.func.replace_all_batch_norm_modules_(model), as torch.func's, or eval "
                        f"mode, or track_running_stats=False) inside vmap")
    return np.asarray(raw(stat))


def _update_running(buf: Any, value: Any, momentum: float, name: str, who: str) -> None:
    """``buf = (1 - momentum) * buf + momentum * value`` in place, never recorded."""
    target = raw(buf)
    if not isinstance(target, np.ndarray):
        raise TypeError(f"{who}: {name} must be a tensor (updated in place), got {type(buf).__name__}")
    if isinstance(buf, Tensor) and buf._level:
        raise VmapError(f"{who}: {name} is batched by cr.vmap and cannot be updated in place; pass "
                        f"running statistics that are not batched, or None")
    new = (1.0 - momentum) * target + momentum * value.reshape(target.shape)
    np.copyto(target, new, casting="unsafe")
    if isinstance(buf, Tensor):
        buf._bump()


def _update_running_stats(running_mean: Any, running_var: Any, mean: Any, unbiased_var: Any, momentum: float,
                          who: str) -> None:
    _update_running(running_mean, mean, momentum, "running_mean", who)
    _update_running(running_var, unbiased_var, momentum, "running_var", who)


def _affine(out: Any, weight: Any, bias: Any, ndim: int) -> Any:
    if weight is not None:
        out = out * _along_channels(weight, ndim)
    if bias is not None:
        out = out + _along_channels(bias, ndim)
    return out


def _check_channel_input(x: Any, expected: str, weight: Any, bias: Any, running_mean: Any, running_var: Any,
                         who: str) -> tuple:
    """Checks an input with channels on axis 1 and its per-channel vectors; returns ``(shape, C)``."""
    shape = _check_input(x, 2, expected, who)
    c = shape[1]
    for v, name in ((weight, "weight"), (bias, "bias"), (running_mean, "running_mean"),
                    (running_var, "running_var")):
        _check_channel_vector(v, c, name, shape, who)
    _check_stats_pair(running_mean, running_var, who)
    return shape, c


# ----- the statistics of a batch split over the ranks (SyncBatchNorm) -----
class _AllReduceSum(Function):
    """The sum over the ranks, differentiable: its cotangent is again the sum over the ranks."""

    @staticmethod
    def forward(ctx: Any, v: Any) -> Any:
        buf = np.array(raw(v), copy=True)
        dist.all_reduce(buf)
        return Tensor(buf)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        return _AllReduceSum.apply(g)

    @staticmethod
    def jvp(ctx: Any, t: Any) -> Any:
        return _AllReduceSum.apply(t)


class _AllGather(Function):
    """Every rank's ``v`` stacked on a new axis 0, differentiable: rank r's cotangent is row r of the
    sum over the ranks of theirs (each rank's loss uses every rank's row)."""

    @staticmethod
    def forward(ctx: Any, v: Any) -> Any:
        arr = np.ascontiguousarray(raw(v))
        rows = [np.empty_like(arr) for _ in range(dist.get_world_size())]
        dist.all_gather(rows, arr)
        return Tensor(np.stack(rows))

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        return _AllReduceSum.apply(g)[dist.get_rank()]

    @staticmethod
    def jvp(ctx: Any, t: Any) -> Any:
        return _AllGather.apply(t)


def _synced_stats(x: Any, axes: tuple, count: int, c: int, shape: tuple, who: str) -> tuple:
    """The mean and biased variance over ``axes`` of the batch that all ranks together hold, and its
    size: each rank's (count, mean, sum of squared deviations) is gathered in one collective and
    combined as Chan et al. (as accurate as one process's two passes; no sum-of-squares cancellation)."""
    if count:
        mean_r = ops.mean(x, axis=axes)
        d = x - _along_channels(mean_r, len(shape))
        m2_r = ops.sum(d * d, axis=axes)
    else:      # an empty shard adds zeros (its mean would be NaN), still from x: every rank's backward
        mean_r = m2_r = ops.sum(x, axis=axes)     # then joins the all-reduce of the cotangents
    n_r = Tensor(np.full(1, count, _dtype(mean_r)))
    rows = _AllGather.apply(ops.concatenate([n_r, mean_r, m2_r]))
    n = np.array(raw(rows)[:, :1])                  # the counts: constants
    total = int(round(float(n.sum())))
    _verify_values_per_channel(total, shape, who, "channel over all ranks (the input here)")
    mean = ops.sum(rows[:, 1:1 + c] * n, axis=0) / total
    dev = rows[:, 1:1 + c] - mean
    var = (ops.sum(rows[:, 1 + c:], axis=0) + ops.sum(dev * dev * n, axis=0)) / total
    return mean, var, total


# ----- batch_norm -----
def _batch_norm(x: Any, running_mean: Any, running_var: Any, weight: Any, bias: Any, training: bool,
                momentum: Any, eps: float, who: str, sync: bool = False) -> Any:
    shape, c = _check_channel_input(x, "(N, C) or (N, C, *)", weight, bias, running_mean, running_var, who)
    x, low = _in_accum(x)
    if training:
        count = math.prod(shape) // c if c else 0
        axes = (0,) + tuple(range(2, len(shape)))
        if sync:
            mean, var, count = _synced_stats(x, axes, count, c, shape, who)
            mean, var = _along_channels(mean, len(shape)), _along_channels(var, len(shape))
            out = (x - mean) / ops.sqrt(var + eps)
        else:
            _verify_values_per_channel(count, shape, who, "channel")
            return _batch_norm_train(x, running_mean, running_var, weight, bias, momentum, eps, low, count, who)
        if running_mean is not None:
            m = _check_momentum(momentum, who)
            unbiased = _stat_value(var, who) * (count / (count - 1))
            _update_running_stats(running_mean, running_var, _stat_value(mean, who), unbiased, m, who)
    else:
        if running_mean is None:
            raise ValueError(f"{who}: running_mean and running_var are needed when training=False "
                             f"(evaluation normalises with the running statistics); pass them, or "
                             f"training=True to normalise with the batch's statistics")
        out = _normalize_with_running(x, running_mean, running_var, eps)
    return _round_back(_affine(out, weight, bias, len(shape)), low)


def _batch_norm_train(x: Any, running_mean: Any, running_var: Any, weight: Any, bias: Any, momentum: Any,
                      eps: float, low: Any, count: int, who: str) -> Any:
    """Training mode on one process: one fused node (ops/normalization.py); the running statistics
    are updated from the batch statistics its forward computed."""
    if running_mean is not None and isinstance(x, Tensor) and x._level:
        _stat_value(x, who)                        # the error: no in-place update inside cr.vmap
    out = batch_norm_train(x, 1.0 if weight is None else weight, 0.0 if bias is None else bias, eps)
    if running_mean is not None:
        m = _check_momentum(momentum, who)
        mean, var = batch_norm_stats(x, eps)
        _update_running_stats(running_mean, running_var, mean, var * (count / (count - 1)), m, who)
    return _round_back(out, low)


def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Batch normalisation over axis 1 of (N, C) or (N, C, *) input, as ``torch.nn.functional.batch_norm``.

    With ``training=True`` it normalises with the batch's mean and biased variance and, when given,
    updates ``running_mean`` and ``running_var`` in place (``(1 - momentum) * running + momentum *
    batch``, the unbiased variance); with ``training=False`` it normalises with the running ones.

    >>> import chainrule as cr
    >>> from chainrule.nn.functional.normalization import batch_norm
    >>> rm, rv = cr.zeros(1), cr.ones(1)
    >>> batch_norm(cr.tensor([[1.0], [3.0]]), rm, rv, training=True, eps=0.0)
    tensor([[-1.],
            [ 1.]])
    >>> rm, rv
    (tensor([0.2]), tensor([1.1]))
    """
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, "batch_norm")


# ----- instance_norm -----
def _instance_norm(x: Any, running_mean: Any, running_var: Any, weight: Any, bias: Any,
                   use_input_stats: bool, momentum: Any, eps: float, who: str) -> Any:
    shape, c = _check_channel_input(x, "(N, C, *)", weight, bias, running_mean, running_var, who)
    x, low = _in_accum(x)
    if use_input_stats:
        count = math.prod(shape[2:])
        _verify_values_per_channel(count, shape, who, "instance (more than 1 spatial element)")
        out, mean, var = _normalize_with_stats(x, tuple(range(2, len(shape))), eps)
        if running_mean is not None:         # PyTorch's: the instances' statistics, averaged over N
            m = _check_momentum(momentum, who)
            mean_v = _stat_value(mean, who).reshape(shape[0], c).mean(axis=0)
            var_v = (_stat_value(var, who) * (count / (count - 1))).reshape(shape[0], c).mean(axis=0)
            _update_running_stats(running_mean, running_var, mean_v, var_v, m, who)
    else:
        if running_mean is None:
            raise ValueError(f"{who}: use_input_stats=False normalises with running_mean and "
                             f"running_var, but none were given; pass them, or use_input_stats=True")
        out = _normalize_with_running(x, running_mean, running_var, eps)
    return _round_back(_affine(out, weight, bias, len(shape)), low)


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None, weight: Any = None,
                  bias: Any = None, use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> Any:
    """Normalise each (example, channel) of (N, C, *) input over its spatial axes, as
    ``torch.nn.functional.instance_norm``.

    Given running statistics and ``use_input_stats=True``, they are updated in place with the
    instances' statistics averaged over the batch; ``use_input_stats=False`` normalises with them.

    >>> import chainrule as cr
    >>> from chainrule.nn.functional.normalization import instance_norm
    >>> instance_norm(cr.tensor([[[1.0, 3.0], [0.0, 4.0]]]), eps=0.0)
    tensor([[[-1.,  1.],
             [-1.,  1.]]])
    """
    return _instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps,
                          "instance_norm")


# ----- group_norm -----
def _group_norm(x: Any, num_groups: int, weight: Any, bias: Any, eps: float, who: str) -> Any:
    shape = _check_input(x, 2, "(N, C, *)", who)
    n, c = shape[0], shape[1]
    if num_groups < 1 or c % num_groups:
        raise ShapeError(f"{who}: input of shape {shape} has {c} channels, which num_groups={num_groups} "
                         f"does not divide; choose num_groups among the divisors of {c}")
    _verify_values_per_channel(n * c // num_groups * math.prod(shape[2:]) if n else 0, shape, who,
                               "group and example")
    for v, name in ((weight, "weight"), (bias, "bias")):
        _check_channel_vector(v, c, name, shape, who)
    x, low = _in_accum(x)
    grouped = ops.reshape(x, (n, num_groups, -1))
    out, _, _ = _normalize_with_stats(grouped, (2,), eps)
    out = ops.reshape(out, shape)
    return _round_back(_affine(out, weight, bias, len(shape)), low)


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    """Normalise each group of ``C // num_groups`` channels of (N, C, *) input (with its spatial axes)
    per example, then scale and shift per channel, as ``torch.nn.functional.group_norm``.

    >>> import chainrule as cr
    >>> from chainrule.nn.functional.normalization import group_norm
    >>> group_norm(cr.tensor([[1.0, 3.0, 0.0, 4.0]]), 2, eps=0.0)
    tensor([[-1.,  1., -1.,  1.]])
    """
    return _group_norm(input, num_groups, weight, bias, eps, "group_norm")


# ----- rms_norm -----
def _as_shape(normalized_shape: Any) -> tuple:
    if np.ndim(normalized_shape) == 0:
        return (int(normalized_shape),)
    return tuple(int(n) for n in normalized_shape)


def _rms_norm(x: Any, normalized_shape: Any, weight: Any, eps: Any, who: str) -> Any:
    normalized_shape = _as_shape(normalized_shape)
    shape = _check_input(x, len(normalized_shape), f"(*, {', '.join(map(str, normalized_shape))})", who)
    k = len(normalized_shape)
    if tuple(shape[len(shape) - k:]) != normalized_shape:
        raise ShapeError(f"{who}: input of shape {shape} does not end in normalized_shape "
                         f"{normalized_shape}; reshape the input or build the layer with "
                         f"normalized_shape={tuple(shape[len(shape) - k:])}")
    if weight is not None and _shape(weight) != normalized_shape:
        raise ShapeError(f"{who}: weight must have shape normalized_shape={normalized_shape}, got "
                         f"{_shape(weight)}")
    xa, low = _in_accum(x)
    if eps is None:                    # PyTorch's: the epsilon of the dtype it computes in
        eps = float(np.finfo(_dtype(xa)).eps)
    axes = tuple(range(len(shape) - k, len(shape)))
    out = xa / ops.sqrt(ops.mean(xa * xa, axis=axes, keepdims=True) + eps)
    return _round_back(out if weight is None else out * weight, low)


def layer_norm(x: Any, normalized_shape: tuple, weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Any:
    """Normalize over the trailing ``normalized_shape`` axes (biased variance, as PyTorch); 16-bit
    input is computed in float32, affine included, and rounded back once.

    >>> import chainrule as cr
    >>> cr.nn.functional.layer_norm(cr.tensor([[1.0, 3.0]]), 2)
    tensor([[-0.999995,  0.999995]])
    """
    shape = np.shape(raw(x))
    if np.ndim(normalized_shape) == 0:
        normalized_shape = (int(normalized_shape),)
    k = len(normalized_shape)
    if tuple(shape[len(shape) - k:]) != tuple(normalized_shape):
        raise ShapeError(f"layer_norm: input of shape {shape} does not end in normalized_shape "
                         f"{tuple(normalized_shape)}")
    x, low = _in_accum(x)
    if _dtype(x).kind == "f":                    # one node each way (complex: the composite)
        out = _layer_norm(x, tuple(range(-k, 0)), eps)
    else:
        out = _normalize_with_stats(x, tuple(range(len(shape) - k, len(shape))), eps)[0]
    if weight is not None:
        out = out * weight
    return _round_back(out if bias is None else out + bias, low)


def rms_norm(input: Any, normalized_shape: Any, weight: Any = None, eps: float | None = None) -> Any:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` axes, as
    ``torch.nn.functional.rms_norm``; ``eps=None`` is the epsilon of the input's dtype.

    >>> import chainrule as cr
    >>> from chainrule.nn.functional.normalization import rms_norm
    >>> rms_norm(cr.tensor([[3.0, 4.0, 0.0]]), 3, eps=0.0).round(4)
    tensor([[1.0392, 1.3856, 0.    ]])
    """
    return _rms_norm(input, normalized_shape, weight, eps, "rms_norm")
