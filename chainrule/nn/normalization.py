"""Normalisation layers: BatchNorm1d/2d, InstanceNorm1d/2d, GroupNorm, RMSNorm, as ``torch.nn``'s.

Names, arguments, defaults, initialisation (weight ones, bias zeros, running_mean zeros, running_var
ones, num_batches_tracked 0) and ``state_dict`` keys follow PyTorch. The running statistics are
buffers: in ``state_dict``, not in ``parameters()``, updated in place outside the graph.
"""
from __future__ import annotations

import warnings
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core._dtypes import get_default_dtype
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.distributed import collectives as dist
from chainrule.nn._common import _positive_int
from chainrule.nn.functional.normalization import _as_shape, _batch_norm, _group_norm, _instance_norm, _rms_norm
from chainrule.nn.module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "RMSNorm",
           "SyncBatchNorm"]


def _fill(t: Tensor | None, value: float) -> None:
    if t is not None:
        t.data[...] = value
        t._bump()


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)


def _register_affine(module: Module, shape: Any, affine: bool, bias: bool, dtype: Any) -> None:
    """``weight`` ones and ``bias`` zeros (None with ``bias=False``) of ``shape``; both None without ``affine``."""
    if affine:
        module.weight = Parameter(np.ones(shape, dtype))
        module.register_parameter("bias", Parameter(np.zeros(shape, dtype)) if bias else None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


class _NormBase(Module):
    """The common part of BatchNorm and InstanceNorm: affine parameters and running-statistics buffers."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        who = type(self).__name__
        self.num_features = _positive_int(num_features, "num_features", who)
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{who}: momentum must be in [0, 1] (running = (1 - momentum) * running + "
                             f"momentum * batch) or None for a cumulative average, got {momentum}")
        self.eps, self.momentum = eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dtype = dtype or get_default_dtype()
        shape = (self.num_features,)
        _register_affine(self, shape, affine, bias, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(shape, dtype)))
            self.register_buffer("running_var", Tensor(np.ones(shape, dtype)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, dtype=np.int64)))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        """running_mean to 0, running_var to 1, num_batches_tracked to 0 (in place)."""
        if self.track_running_stats:
            _fill(self.running_mean, 0.0)
            _fill(self.running_var, 1.0)
            _fill(self.num_batches_tracked, 0)

    def reset_parameters(self) -> None:
        """The running statistics and the affine parameters (weight 1, bias 0) to their initial values."""
        self.reset_running_stats()
        _fill(self.weight, 1.0)
        _fill(self.bias, 0.0)

    def _check_ndim(self, x: Any) -> tuple:
        shape = _shape(x)
        if len(shape) not in self._ndims:
            raise ShapeError(f"{type(self).__name__}: expected {self._layout} input, got {len(shape)}D input "
                             f"of shape {shape}; {self._hint}")
        return shape

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _ndims: tuple = (2, 3)
    _layout = "2D (N, C) or 3D (N, C, L)"
    _hint = ""

    def forward(self, x: Any) -> Any:
        shape = self._check_ndim(x)
        if shape[1] != self.num_features:
            raise ShapeError(f"{type(self).__name__}: input of shape {shape} has {shape[1]} channels on "
                             f"axis 1, but num_features={self.num_features}; build the layer with "
                             f"num_features={shape[1]}, or move the channel axis to 1")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            nbt = self.num_batches_tracked
            np.add(nbt.data, 1, out=nbt.data)
            nbt._bump()
            if self.momentum is None:                   # the cumulative moving average
                factor = 1.0 / float(nbt.data)
        use_batch_stats = self.training or self.running_mean is None
        keep = not self.training or self.track_running_stats
        return _batch_norm(x, self.running_mean if keep else None, self.running_var if keep else None,
                           self.weight, self.bias, use_batch_stats, factor, self.eps, type(self).__name__,
                           self._sync())

    def _sync(self) -> bool:
        """Whether the batch statistics are reduced over the ranks (SyncBatchNorm's)."""
        return False


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) input over the batch (and length), per channel.

    Training normalises with the batch's mean and biased variance and updates ``running_mean`` and
    ``running_var`` (``(1 - momentum) * running + momentum * batch``, the unbiased variance;
    ``momentum=None`` is the cumulative average); eval mode normalises with the running ones.

    >>> import chainrule as cr
    >>> from chainrule.nn.normalization import BatchNorm1d
    >>> bn = BatchNorm1d(2)
    >>> bn(cr.tensor([[1.0, 0.0], [3.0, 4.0]])).round(3)
    tensor([[-1., -1.],
            [ 1.,  1.]], grad_fn=<RoundBackward>)
    >>> bn.running_mean, int(bn.num_batches_tracked), list(bn.state_dict())
    (tensor([0.2, 0.2]), 1, ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked'])
    """

    _hint = "for (N, C, H, W) images use BatchNorm2d"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) input over the batch and the image, per channel (as BatchNorm1d).

    >>> import chainrule as cr
    >>> from chainrule.nn.normalization import BatchNorm2d
    >>> BatchNorm2d(3)(cr.ones((2, 3, 4, 4))).shape
    (2, 3, 4, 4)
    """

    _ndims = (4,)
    _layout = "4D (N, C, H, W)"
    _hint = "for (N, C) or (N, C, L) use BatchNorm1d; add a batch axis with x.reshape(1, *x.shape)"


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation of (N, C, *) input whose batch is split over the ranks of
    ``cr.distributed``: in training the statistics are those of the whole batch (every rank's count,
    mean and sum of squared deviations, gathered), the backward reduces their cotangents over the
    ranks, and the running statistics are updated identically everywhere, as ``torch.nn.SyncBatchNorm``.

    In eval mode, in a world of one, or without an initialised process group it is ``BatchNorm``
    (as PyTorch, which falls back to ``F.batch_norm`` whenever there is nothing to synchronise).
    ``process_group``: only the world (``None``); ``convert_sync_batchnorm`` swaps it in for a
    model's BatchNorm layers.

    >>> import chainrule as cr
    >>> net = cr.nn.SyncBatchNorm.convert_sync_batchnorm(cr.nn.Sequential(cr.nn.BatchNorm1d(2)))
    >>> type(net[0]).__name__, net[0](cr.tensor([[1.0, 0.0], [3.0, 4.0]])).round(3)
    ('SyncBatchNorm', tensor([[-1., -1.],
            [ 1.,  1.]], grad_fn=<RoundBackward>))
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group: Any = None, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        if process_group is not None:
            raise ValueError(f"SyncBatchNorm: cr.distributed has one process group, the world; pass "
                             f"process_group=None (got {process_group!r})")
        if device not in (None, "cpu"):
            raise ValueError(f"SyncBatchNorm: chainrule computes on the CPU; pass device=None, got {device!r}")
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype, bias=bias)
        self.process_group = None

    def _check_ndim(self, x: Any) -> tuple:
        shape = _shape(x)
        if len(shape) < 2:
            raise ShapeError(f"SyncBatchNorm: expected input of at least 2 dimensions (N, C, *), got "
                             f"{len(shape)}D input of shape {shape}; add a batch axis with x.reshape(1, -1)")
        if shape[1] == 0:
            raise ShapeError(f"SyncBatchNorm: input of shape {shape} has no channels (axis 1)")
        return shape

    def _sync(self) -> bool:
        return self.training and dist.is_initialized() and dist.get_world_size() > 1

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """``module`` with every BatchNorm1d/2d inside replaced by a SyncBatchNorm holding the same
        parameters, buffers and mode (a BatchNorm given itself: a new SyncBatchNorm), as PyTorch."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group, dtype=_buffer_dtype(module),
                      bias=module.bias is not None)
            for name in ("weight", "bias"):
                out.register_parameter(name, getattr(module, name))
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                out.register_buffer(name, getattr(module, name))
            out.training = module.training
        for name, child in list(module.named_children()):
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


def _buffer_dtype(m: _NormBase) -> Any:
    t = m.weight if m.weight is not None else m.running_mean
    return None if t is None else t.dtype


class _InstanceNorm(_NormBase):
    _ndims: tuple = (2, 3)
    _layout = ""
    _hint = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype, bias=bias)

    def forward(self, x: Any) -> Any:
        shape = self._check_ndim(x)
        unbatched = len(shape) == self._ndims[0]
        axis = 0 if unbatched else 1
        who = type(self).__name__
        if shape[axis] != self.num_features:
            msg = (f"{who}: input of shape {shape} has {shape[axis]} channels on axis {axis}, but "
                   f"num_features={self.num_features}")
            if self.affine or self.track_running_stats:
                raise ShapeError(msg + f"; build the layer with num_features={shape[axis]}")
            warnings.warn(msg + " (unused, since affine=False and track_running_stats=False)", stacklevel=2)
        if unbatched:
            x = ops.reshape(x, (1,) + shape)
        momentum = 0.0 if self.momentum is None else self.momentum      # as PyTorch: None never updates
        out = _instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                             self.training or not self.track_running_stats, momentum, self.eps, who)
        return ops.reshape(out, shape) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Normalise each channel of each example of (N, C, L) or unbatched (C, L) input over its length.

    ``affine=False`` and ``track_running_stats=False`` by default, as PyTorch; with running statistics,
    training updates them (the instances' statistics averaged over the batch) and eval uses them.

    >>> import chainrule as cr
    >>> from chainrule.nn.normalization import InstanceNorm1d
    >>> InstanceNorm1d(2, eps=0.0)(cr.tensor([[1.0, 3.0], [0.0, 4.0]]))
    tensor([[-1.,  1.],
            [-1.,  1.]])
    """

    _ndims = (2, 3)
    _layout = "2D (C, L) or 3D (N, C, L)"
    _hint = "for (N, C, H, W) images use InstanceNorm2d"


class InstanceNorm2d(_InstanceNorm):
    """Normalise each channel of each example of (N, C, H, W) or unbatched (C, H, W) input over the image.

    >>> import chainrule as cr
    >>> from chainrule.nn.normalization import InstanceNorm2d
    >>> InstanceNorm2d(3, affine=True)(cr.ones((2, 3, 4, 4))).shape
    (2, 3, 4, 4)
    """

    _ndims = (3, 4)
    _layout = "3D (C, H, W) or 4D (N, C, H, W)"
    _hint = "for (N, C, L) use InstanceNorm1d"


class GroupNorm(Module):
    """Normalise groups of ``num_channels // num_groups`` channels of (N, C, *) input per example, then
    scale and shift per channel (weight ones, bias zeros).

    >>> import chainrule as cr
    >>> from chainrule.nn.normalization import GroupNorm
    >>> GroupNorm(2, 4, eps=0.0)(cr.tensor([[1.0, 3.0, 0.0, 4.0]]))
    tensor([[-1.,  1., -1.,  1.]], grad_fn=<AddBackward>)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_groups = _positive_int(num_groups, "num_groups", "GroupNorm")
        self.num_channels = _positive_int(num_channels, "num_channels", "GroupNorm")
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups}); choose num_groups among the divisors of {num_channels}")
        self.eps, self.affine = eps, affine
        dtype = dtype or get_default_dtype()
        _register_affine(self, (self.num_channels,), affine, bias, dtype)

    def reset_parameters(self) -> None:
        """weight to 1, bias to 0 (in place)."""
        _fill(self.weight, 1.0)
        _fill(self.bias, 0.0)

    def forward(self, x: Any) -> Any:
        shape = _shape(x)
        if len(shape) >= 2 and shape[1] != self.num_channels:
            raise ShapeError(f"GroupNorm: input of shape {shape} has {shape[1]} channels on axis 1, but "
                             f"num_channels={self.num_channels}; build the layer with num_channels={shape[1]}")
        return _group_norm(x, self.num_groups, self.weight, self.bias, self.eps, "GroupNorm")

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` axes (PyTorch 2.4's
    RMSNorm: weight ones; ``eps=None`` is the epsilon of the input's dtype).

    >>> import chainrule as cr
    >>> from chainrule.nn.normalization import RMSNorm
    >>> RMSNorm(2, eps=0.0)(cr.tensor([[3.0, -3.0]]))
    tensor([[ 1., -1.]], grad_fn=<MultiplyBackward>)
    """

    def __init__(self, normalized_shape: Any, eps: float | None = None, elementwise_affine: bool = True,
                 dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        dtype = dtype or get_default_dtype()
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        """weight to 1 (in place)."""
        _fill(self.weight, 1.0)

    def forward(self, x: Any) -> Any:
        return _rms_norm(x, self.normalized_shape, self.weight, self.eps, "RMSNorm")

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
