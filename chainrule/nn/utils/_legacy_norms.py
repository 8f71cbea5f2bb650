"""The older hook-based ``weight_norm`` and ``spectral_norm`` (``torch.nn.utils.weight_norm`` /
``spectral_norm``): the weight is a plain attribute that a forward pre-hook recomputes from
``weight_g``/``weight_v``, or from ``weight_orig`` and the ``weight_u``/``weight_v`` buffers."""
from __future__ import annotations

import warnings
from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.grad_mode import no_grad
from chainrule.core.tensor import Tensor
from chainrule.nn import functional as F
from chainrule.nn import init
from chainrule.nn.module import Module, Parameter
from chainrule.nn.utils.parametrizations import (
    _TRANSPOSED,
    _norm_dim,
    _weight_to_matrix,
    norm_except_dim,
    weight_norm_value,
)

__all__ = ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]


def _parameter(module: Module, name: str, who: str) -> Parameter:
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"{who}: module {type(module).__name__} has no parameter named {name!r}; its "
                         f"parameters are {[k for k, p in module._parameters.items() if p is not None]}")
    return weight


def _check_no_hook(module: Module, kind: type, name: str, who: str) -> None:
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, kind) and hook.name == name:
            raise RuntimeError(f"{who}: cannot register two {who} hooks on the same parameter {name!r}")


class WeightNorm:
    """The forward pre-hook of ``weight_norm``: ``module.<name> = g * v / ||v||`` before each forward."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        return weight_norm_value(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        _check_no_hook(module, WeightNorm, name, "weight_norm")
        fn = WeightNorm(name, dim)
        weight = _parameter(module, name, "weight_norm")
        if fn.dim != -1:
            _norm_dim(fn.dim, weight.ndim, "weight_norm")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight.detach(), fn.dim)))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """The hook-based weight normalization (``torch.nn.utils.weight_norm``, deprecated there in favour of
    ``parametrizations.weight_norm``, and so here: it warns): parameters ``<name>_g`` and ``<name>_v``.

    >>> import chainrule as cr, warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     m = cr.nn.utils.weight_norm(cr.nn.Linear(3, 2))
    >>> list(m.state_dict())
    ['bias', 'weight_g', 'weight_v']
    """
    warnings.warn("`cr.nn.utils.weight_norm` is deprecated in favor of "
                  "`cr.nn.utils.parametrizations.weight_norm` (as in PyTorch).", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def _remove_hook(module: Module, kind: type, name: str, who: str) -> None:
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return
    raise ValueError(f"{who}: {who.replace('remove_', '')} of {name!r} not found in {type(module).__name__}")


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo ``weight_norm``: ``<name>`` becomes a parameter again, holding ``g * v / ||v||``.

    >>> import warnings, chainrule as cr
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")             # torch's FutureWarning for the old form
    ...     m = cr.nn.utils.weight_norm(cr.nn.Linear(3, 2))
    >>> sorted(cr.nn.utils.remove_weight_norm(m).state_dict())
    ['bias', 'weight']
    """
    _remove_hook(module, WeightNorm, name, "remove_weight_norm")
    return module


class SpectralNorm:
    """The forward pre-hook of ``spectral_norm``: ``module.<name> = <name>_orig / sigma`` before each
    forward, with ``n_power_iterations`` of the power method first in training mode."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return _weight_to_matrix(weight, self.dim)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            # in place in the buffers; the clones are what this forward keeps for backward
            with no_grad():
                for _ in range(self.n_power_iterations):
                    ops.copyto(v, F.normalize(ops.matmul(weight_mat.T, u), dim=0, eps=self.eps))
                    ops.copyto(u, F.normalize(ops.matmul(weight_mat, v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()
        sigma = ops.dot(u, ops.matmul(weight_mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        _check_no_hook(module, SpectralNorm, name, "spectral_norm")
        weight = _parameter(module, name, "spectral_norm")
        fn = SpectralNorm(name, n_power_iterations, _norm_dim(dim, weight.ndim, "spectral_norm"), eps)
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(init.normal_(Tensor(np.empty(h, weight.dtype))), dim=0, eps=fn.eps)
            v = F.normalize(init.normal_(Tensor(np.empty(w, weight.dtype))), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """The hook-based spectral normalization (``torch.nn.utils.spectral_norm``): parameter
    ``<name>_orig``, buffers ``<name>_u`` and ``<name>_v`` (drawn from ``cr.random``'s default
    generator), ``<name>`` recomputed before each forward.

    >>> import chainrule as cr
    >>> list(cr.nn.utils.spectral_norm(cr.nn.Linear(3, 2)).state_dict())
    ['bias', 'weight_orig', 'weight_u', 'weight_v']
    """
    if dim is None:
        dim = 1 if isinstance(module, _TRANSPOSED) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo ``spectral_norm``: ``<name>`` becomes a parameter again, holding ``<name>_orig / sigma``.

    >>> import chainrule as cr
    >>> m = cr.nn.utils.spectral_norm(cr.nn.Linear(3, 2))
    >>> sorted(cr.nn.utils.remove_spectral_norm(m).state_dict())
    ['bias', 'weight']
    """
    _remove_hook(module, SpectralNorm, name, "remove_spectral_norm")
    return module
