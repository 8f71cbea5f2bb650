"""``cr.nn.utils.parametrizations``: ``orthogonal``, ``weight_norm`` and ``spectral_norm`` as
parametrizations (``torch.nn.utils.parametrizations``), with PyTorch's maps, state_dict keys and power
iteration."""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core._backend import np
from chainrule.core.grad_mode import no_grad
from chainrule.core.random import get_generator
from chainrule.core.tensor import Tensor
from chainrule.nn import functional as F
from chainrule.nn import init
from chainrule.nn.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from chainrule.nn.module import Module
from chainrule.nn.utils import parametrize

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


def _tensor_attribute(module: Module, name: str, who: str) -> Tensor:
    """``module.<name>``, which must be a tensor (a parameter or a buffer, parametrized or not)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"{who}: module {type(module).__name__} has no parameter or buffer with name "
                         f"{name!r}; its parameters are {list(module._parameters)}")
    return weight


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """``torch.linalg.householder_product``: the first ``k`` columns of ``H_0 ... H_{k-1}``,
    ``H_i = I - tau_i v_i v_i^H`` with ``v_i`` the column ``i`` of ``a`` below the diagonal and 1 on it."""
    n, k = a.shape[-2:]
    e = Tensor(np.eye(n, k, dtype=a.dtype))
    reflectors = ops.tril(a, -1) + e
    q = ops.broadcast_to(e, a.shape)
    for i in reversed(range(k)):
        v = reflectors[..., :, i:i + 1]
        q = q - (tau[..., i:i + 1, None] * v) @ (ops.conj(v).mT @ q)
    return q


def _make_orthogonal(a: Any) -> Any:
    """The Q of ``a = QR`` with R's diagonal made positive (the unique one), as ndarrays."""
    q, r = np.linalg.qr(a)
    d = np.diagonal(r, axis1=-2, axis2=-1)
    return q * np.where(d == 0, 1, d / np.abs(np.where(d == 0, 1, d)))[..., None, :]


def _is_orthogonal(q: Any) -> bool:
    n, k = q.shape[-2:]
    return bool(np.allclose(np.conj(np.swapaxes(q, -1, -2)) @ q, np.eye(k), rtol=1e-5,
                            atol=10.0 * n * np.finfo(q.dtype).eps))


class _Orthogonal(Module):
    _MAPS = ("matrix_exp", "cayley", "householder")

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if np.iscomplexobj(weight.data) and orthogonal_map == "householder":
            raise ValueError("orthogonal: the householder parametrization does not support complex tensors; "
                             "use orthogonal_map='matrix_exp' or 'cayley'")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        n, k = x.shape[-2:]
        transposed = n < k
        if transposed:
            x, (n, k) = x.mT, (k, n)
        if self.orthogonal_map == "householder":
            a = ops.tril(x, -1)
            q = _householder_product(a, 2.0 / (1.0 + ops.sum(a * a, axis=-2)))
            # PyTorch multiplies by X's diagonal cast to int: a constant (+-1 after right_inverse)
            q = q * np.trunc(np.diagonal(x.data, axis1=-2, axis2=-1))[..., None, :]
        else:
            x = ops.tril(x)
            if n != k:
                x = ops.concatenate([x, Tensor(np.zeros((*x.shape[:-2], n, n - k), x.dtype))], axis=-1)
            a = x - ops.conj(x).mT
            if self.orthogonal_map == "matrix_exp":
                q = ops.linalg.matrix_exp(a)
            else:
                eye = Tensor(np.eye(n, dtype=a.dtype))
                q = ops.linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
            if n != k:
                q = q[..., :k]
        if "base" in self._buffers:
            q = self.base @ q
        return q.mT if transposed else q

    def right_inverse(self, q: Tensor) -> Tensor:
        if q.shape != self.shape:
            raise ValueError(f"orthogonal: expected a matrix or batch of matrices of shape {self.shape}, got "
                             f"a tensor of shape {q.shape}")
        arr = np.asarray(q.detach().data)
        n, k = arr.shape[-2:]
        transpose = n < k
        if transpose:
            arr, (n, k) = np.swapaxes(arr, -1, -2), (k, n)
        if "base" not in self._buffers:
            if self.orthogonal_map != "householder":
                raise NotImplementedError("orthogonal: it is not possible to assign to the matrix exponential "
                                          "or the Cayley parametrizations when use_trivialization=False")
            h, tau = np.linalg.qr(arr, mode="raw")          # LAPACK geqrf, its reflectors transposed
            a = np.swapaxes(h, -1, -2).copy()
            diag = np.sign(np.diagonal(a, axis1=-2, axis2=-1)) * np.where(tau == 0.0, -1, 1)
            idx = np.arange(k)
            a[..., idx, idx] = diag
            return Tensor(np.swapaxes(a, -1, -2) if transpose else a)
        if n == k:
            arr = arr.copy() if _is_orthogonal(arr) else _make_orthogonal(arr)
        else:
            extra = get_generator(None).standard_normal((*arr.shape[:-2], n, n - k)).astype(arr.dtype)
            arr = _make_orthogonal(np.concatenate([arr, extra], axis=-1))
        self.base = Tensor(arr)
        neg_id = np.zeros(q.shape, q.dtype)
        idx = np.arange(min(q.shape[-2:]))
        neg_id[..., idx, idx] = -1.0
        return Tensor(neg_id)


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Keep ``module.<name>`` (a matrix, or a batch of them) orthogonal (or unitary), as
    ``torch.nn.utils.parametrizations.orthogonal``: ``orthogonal_map`` is ``"matrix_exp"`` (the default
    for square or complex matrices), ``"cayley"`` or ``"householder"`` (the default otherwise); with
    ``use_trivialization`` the starting matrix is the buffer ``parametrizations.<name>.0.base``.

    >>> import chainrule as cr, numpy as np
    >>> m = cr.nn.utils.parametrizations.orthogonal(cr.nn.Linear(4, 3, dtype=cr.float64))
    >>> w = m.weight.detach().numpy(); bool(np.allclose(w @ w.T, np.eye(3)))
    True
    """
    weight = _tensor_attribute(module, name, "orthogonal")
    if weight.ndim < 2:
        raise ValueError(f"orthogonal: expected a matrix or batch of matrices, got a tensor of {weight.ndim} "
                         f"dimensions (shape {weight.shape})")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or np.iscomplexobj(weight.data) else "householder"
    if orthogonal_map not in _Orthogonal._MAPS:
        raise ValueError(f'orthogonal: orthogonal_map has to be one of "matrix_exp", "cayley", "householder", '
                         f"got {orthogonal_map!r}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


def _norm_dim(dim: int, ndim: int, who: str) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"{who}: dimension out of range (expected to be in range of [{-max(ndim, 1)}, "
                         f"{max(ndim, 1) - 1}], but got {dim}) for a weight of {ndim} dimensions")
    return dim % max(ndim, 1)


def norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """``torch.norm_except_dim(v, 2, dim)``: the 2-norm over every axis but ``dim``, kept as size-1 axes
    (``dim=-1``: the norm of the whole tensor, 0-d)."""
    if dim == -1:
        return ops.linalg.vector_norm(v)
    dim = _norm_dim(dim, v.ndim, "weight_norm")
    axes = tuple(a for a in range(v.ndim) if a != dim)
    return ops.linalg.vector_norm(v, axis=axes, keepdims=True) if axes else ops.abs(v)


def weight_norm_value(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """``torch._weight_norm(v, g, dim)``: ``v * (g / norm_except_dim(v, dim))``."""
    return v * (g / norm_except_dim(v, dim))


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_norm_value(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalization ``w = g * v / ||v||`` (norm over every axis but ``dim``; the whole tensor
    with ``dim=None``), as ``torch.nn.utils.parametrizations.weight_norm``: the magnitude ``g`` is
    ``parametrizations.<name>.original0``, the direction ``v`` is ``original1``. A checkpoint of the old
    hook form (``<name>_g``, ``<name>_v``: ``torch.nn.utils.weight_norm``) loads too, renamed by a
    load_state_dict pre-hook, as PyTorch's. Returns ``module``.

    >>> import chainrule as cr
    >>> m = cr.nn.utils.parametrizations.weight_norm(cr.nn.Linear(3, 2))
    >>> list(m.state_dict()), m.parametrizations.weight.original0.shape
    (['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1'], (2, 1))
    """
    weight = _tensor_attribute(module, name, "weight_norm")
    if dim is not None and dim != -1:
        _norm_dim(dim, weight.ndim, "weight_norm")
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    module.register_load_state_dict_pre_hook(_old_weight_norm_keys(name))
    return module


def _old_weight_norm_keys(name: str) -> Any:
    """The load_state_dict pre-hook of ``weight_norm``: the old form's ``<name>_g`` and ``<name>_v``
    become ``parametrizations.<name>.original0`` and ``original1`` (both present, or left alone)."""

    def rename(module: Module, state_dict: dict, prefix: str, *_: Any) -> None:
        g, v = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g in state_dict and v in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v)

    return rename


def _weight_to_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` as a matrix for spectral norm: axis ``dim`` first, the others flattened into the columns."""
    if dim != 0:
        weight = ops.permute_dims(weight, (dim, *(d for d in range(weight.ndim) if d != dim)))
    return ops.reshape(weight, (weight.shape[0], -1))


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        self.dim = _norm_dim(dim, ndim, "spectral_norm")
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = _weight_to_matrix(weight.detach(), self.dim)
            h, w = weight_mat.shape
            u = init.normal_(Tensor(np.empty(h, weight.dtype)))
            v = init.normal_(Tensor(np.empty(w, weight.dtype)))
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        # the buffers change in place (as PyTorch's out=), so a forward's clone of them is what it saves
        with no_grad():
            weight_h = ops.conj(weight_mat).T
            for _ in range(n_power_iterations):
                ops.copyto(self._u, F.normalize(ops.matmul(weight_mat, self._v), dim=0, eps=self.eps))
                ops.copyto(self._v, F.normalize(ops.matmul(weight_h, self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = _weight_to_matrix(weight, self.dim)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = ops.vdot(u, ops.matmul(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


_TRANSPOSED = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Spectral normalization ``W / sigma(W)``, ``sigma`` estimated by power iteration (buffers
    ``parametrizations.<name>.0._u`` and ``._v``, updated ``n_power_iterations`` times per access in
    training mode; 15 iterations from a random start drawn from ``cr.random``'s default generator at
    registration), as ``torch.nn.utils.parametrizations.spectral_norm``. ``dim`` is the output axis:
    0, or 1 for ``ConvTranspose*d``. Returns ``module``.

    >>> import chainrule as cr
    >>> m = cr.nn.utils.parametrizations.spectral_norm(cr.nn.Linear(4, 3))
    >>> list(m.state_dict())[1:]
    ['parametrizations.weight.original', 'parametrizations.weight.0._u', 'parametrizations.weight.0._v']
    >>> float(cr.linalg.svd(m.weight.detach())[1][0]) > 0.99
    True
    """
    weight = _tensor_attribute(module, name, "spectral_norm")
    if dim is None:
        dim = 1 if isinstance(module, _TRANSPOSED) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module

