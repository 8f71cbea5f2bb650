"""Op-table rows for chainrule/ops/decompositions.py: ``SPECS`` (float64 inputs, for OP_SPECS) and
``COMPLEX_SPECS`` (complex128 inputs, for op_specs.COMPLEX_SPECS).

Every row builds a well-conditioned matrix from its raw uniform input (a constant float64 shift
keeps the spectrum separated, the factors of full rank, and 16-bit inputs upcast) and returns a
gauge-invariant function of the decomposition: eigenvalues, |eigenvector entries|^2 (invariant to
v -> v e^{i phi}), Q and R (unique under LAPACK's sign convention, as in PyTorch). The real rows
return real arrays (view_as_real of complex results), as the real op table expects.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import chainrule as cr
from chainrule.ops import decompositions as D
from tests.op_specs.spec import OpSpec

# eigenvalues 1 +- 2i and 4 (real matrix), separated by > 2 under perturbations of |x| < 0.3
_EIG_SHIFT = np.array([[1.0, 2.0, 0.0], [-2.0, 1.0, 0.0], [0.0, 0.0, 4.0]])
_CEIG_SHIFT = np.diag([1.0 + 1.0j, -1.0, 2.0 - 1.0j])
_SHIFT = 3.0 * np.eye(3)
_CSHIFT = _SHIFT + 0j
_NARROW = (-0.3, 0.3)
_ONE = np.ones((1, 1))           # a float64 array: 16-bit inputs upcast, as in the linalg rows


def _tl(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*xs: Any) -> Any:
        import torch
        return fn(torch, *xs)
    return call


def _c(t: Any, a: Any) -> Any:
    """A numpy constant as a torch tensor."""
    return t.tensor(a)


# ----- chainrule functions -----
def _eig_all(a: Any) -> Any:
    w, v = D.eig(a)
    return cr.concatenate([cr.ravel(w), cr.ravel(cr.abs(v) ** 2 * (1 + 0j))])


def _t_eig_all(t: Any, a: Any) -> Any:
    w, v = t.linalg.eig(a)
    return t.cat([w.ravel(), (v.abs() ** 2 * (1 + 0j)).ravel()])


def _qr_all(a: Any, mode: str = "reduced") -> Any:
    q, r = D.qr(a, mode)
    return cr.concatenate([cr.ravel(q), cr.ravel(r)])


def _t_qr_all(t: Any, a: Any, mode: str = "reduced") -> Any:
    q, r = t.linalg.qr(a, mode)
    return t.cat([q.ravel(), r.ravel()])


def _st(trans: int, lower: bool, unit: bool) -> Callable[..., Any]:
    return lambda a, b: D.solve_triangular(a + _SHIFT, b, trans=trans, lower=lower, unit_diagonal=unit)


def _t_st(trans: int, lower: bool, unit: bool) -> Callable[..., Any]:
    def call(t: Any, a: Any, b: Any) -> Any:
        a = a + _c(t, _SHIFT).to(a.dtype)
        m = {0: a, 1: a.mT, 2: a.mH}[trans]
        return t.linalg.solve_triangular(m, b.to(a.dtype), upper=(not lower) ^ (trans > 0), unitriangular=unit)
    return _tl(call)


def _slogdet_both(z: Any) -> Any:
    sign, logabsdet = cr.linalg.slogdet(z)
    return cr.stack([sign, logabsdet * (1 + 0j)])


def _t_slogdet_both(t: Any, z: Any) -> Any:
    sign, logabsdet = t.linalg.slogdet(z)
    return t.stack([sign, logabsdet * (1 + 0j)])


def _hpd(z: Any) -> Any:
    """A Hermitian positive-definite matrix from any square z."""
    return z @ cr.conj(z).mT + _CSHIFT


def _t_hpd(t: Any, z: Any) -> Any:
    return z @ z.mH + _c(t, _CSHIFT)


def _cplx(x: Any) -> Any:
    """A complex matrix from a real one (for the real rows of complex-only primitives)."""
    return x + 0.5j * x.mT


def _real(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *xs: cr.view_as_real(fn(*xs))


def _treal(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(t: Any, *xs: Any) -> Any:
        return t.view_as_real(fn(t, *xs))
    return _tl(call)


SPECS: list[OpSpec] = [
    OpSpec("eig", _real(lambda a: _eig_all(a + _EIG_SHIFT)), shapes=((3, 3),), domain=_NARROW,
           torch_fn=_treal(lambda t, a: _t_eig_all(t, a + _c(t, _EIG_SHIFT)))),
    OpSpec("eig", _real(lambda a: _eig_all(a + _EIG_SHIFT)), id="eig-batched", shapes=((2, 3, 3),), domain=_NARROW,
           order=1, torch_fn=_treal(lambda t, a: _t_eig_all(t, a + _c(t, _EIG_SHIFT)))),
    OpSpec("eigvals", _real(lambda a: D.eigvals(a + _EIG_SHIFT)), shapes=((3, 3),), domain=_NARROW,
           torch_fn=_treal(lambda t, a: t.linalg.eigvals(a + _c(t, _EIG_SHIFT)))),
    OpSpec("qr", lambda a: _qr_all(a + _ONE), shapes=((4, 3),),
           torch_fn=_tl(lambda t, a: _t_qr_all(t, a + 1.0))),
    OpSpec("qr", lambda a: _qr_all(a + _ONE), id="qr-wide", shapes=((3, 5),),
           torch_fn=_tl(lambda t, a: _t_qr_all(t, a + 1.0))),
    OpSpec("qr", lambda a: _qr_all(a + _ONE, "complete"), id="qr-complete-wide", shapes=((2, 3, 4),), order=1,
           torch_fn=_tl(lambda t, a: _t_qr_all(t, a + 1.0, "complete"))),
    OpSpec("qr", lambda a: D.qr(a + _ONE, "r"), id="qr-r", shapes=((3, 3),),
           torch_fn=_tl(lambda t, a: t.linalg.qr(a + 1.0)[1])),
    OpSpec("matrix_exp", lambda a: D.matrix_exp(a * 1.0), shapes=((3, 3),), domain=(-1.0, 1.0),
           torch_fn=_tl(lambda t, a: t.linalg.matrix_exp(a))),
    OpSpec("matrix_exp", lambda a: D.matrix_exp(a * 1.0), id="matrix_exp-batched", shapes=((2, 2, 2),),
           domain=(-1.0, 1.0), order=1, torch_fn=_tl(lambda t, a: t.linalg.matrix_exp(a))),
    OpSpec("solve_triangular", _st(0, True, False), shapes=((3, 3), (3, 2)), domain=(-1.0, 1.0),
           torch_fn=_t_st(0, True, False)),
    OpSpec("solve_triangular", _st(1, False, True), id="solve_triangular-T-unit", shapes=((3, 3), (2, 3, 2)),
           domain=(-1.0, 1.0), torch_fn=_t_st(1, False, True)),
    OpSpec("solve_triangular", _st(2, True, False), id="solve_triangular-C-vector", shapes=((2, 3, 3), (3,)),
           domain=(-1.0, 1.0), order=1,
           torch_fn=_tl(lambda t, a, b: t.linalg.solve_triangular(
               (a + _c(t, _SHIFT)).mT, b[:, None], upper=True)[..., 0])),
    OpSpec("solve_triangular", lambda c, b: D.cho_solve((c + _SHIFT, True), b), id="cho_solve",
           shapes=((3, 3), (3, 2)), domain=(-1.0, 1.0),
           torch_fn=_tl(lambda t, c, b: t.cholesky_solve(b, t.tril(c + _c(t, _SHIFT))))),
    OpSpec("solve_triangular", lambda c, b: D.cho_solve((c + _SHIFT, False), b), id="cho_solve-upper",
           shapes=((3, 3), (3,)), domain=(-1.0, 1.0), order=1,
           torch_fn=_tl(lambda t, c, b: t.cholesky_solve(b[:, None], t.triu(c + _c(t, _SHIFT)), upper=True)[:, 0])),
    OpSpec("logdet", _real(lambda x: _slogdet_both(_cplx(x) - _CSHIFT)), shapes=((3, 3),), domain=(-0.5, 0.5),
           torch_fn=_treal(lambda t, x: _t_slogdet_both(t, x + 0.5j * x.mT - _c(t, _CSHIFT)))),
    OpSpec("cholesky", lambda x: cr.linalg.cholesky(x @ x.mT + _SHIFT, upper=True), id="cholesky-upper",
           shapes=((3, 3),), torch_fn=_tl(lambda t, x: t.linalg.cholesky(x @ x.mT + _c(t, _SHIFT), upper=True))),
    OpSpec("cholesky", _real(lambda x: cr.linalg.cholesky(_hpd(_cplx(x)))), shapes=((3, 3),),
           torch_fn=_treal(lambda t, x: t.linalg.cholesky(_t_hpd(t, x + 0.5j * x.mT)))),
]

COMPLEX_SPECS: list[OpSpec] = [
    OpSpec("eig", lambda a: _eig_all(a + _CEIG_SHIFT), shapes=((3, 3),), domain=_NARROW, imag=_NARROW, kinds="c",
           torch_fn=_tl(lambda t, a: _t_eig_all(t, a + _c(t, _CEIG_SHIFT)))),
    OpSpec("eig", lambda a: _eig_all(a + _EIG_SHIFT), id="eig-real-input", shapes=((3, 3),), domain=_NARROW,
           kinds="r", torch_fn=_tl(lambda t, a: _t_eig_all(t, a + _c(t, _EIG_SHIFT)))),
    OpSpec("eigvals", lambda a: D.eigvals(a + _CEIG_SHIFT), shapes=((2, 3, 3),), domain=_NARROW, imag=_NARROW,
           kinds="c", torch_fn=_tl(lambda t, a: t.linalg.eigvals(a + _c(t, _CEIG_SHIFT)))),
    OpSpec("qr", lambda a: _qr_all(a + _ONE), shapes=((4, 3),), kinds="c",
           torch_fn=_tl(lambda t, a: _t_qr_all(t, a + 1.0))),
    OpSpec("qr", lambda a: _qr_all(a + _ONE), id="qr-wide", shapes=((2, 3),), kinds="c",
           torch_fn=_tl(lambda t, a: _t_qr_all(t, a + 1.0))),
    OpSpec("qr", lambda a: _qr_all(a + _ONE, "complete"), id="qr-complete-square", shapes=((3, 3),), kinds="c",
           torch_fn=_tl(lambda t, a: _t_qr_all(t, a + 1.0, "complete"))),
    OpSpec("matrix_exp", D.matrix_exp, shapes=((3, 3),), domain=(-1.0, 1.0), kinds="c",
           torch_fn=_tl(lambda t, a: t.linalg.matrix_exp(a))),
    OpSpec("solve_triangular", lambda a, b: D.solve_triangular(a + _CSHIFT, b, lower=True), shapes=((3, 3), (3, 2)),
           domain=(-1.0, 1.0), kinds="cc", torch_fn=_t_st(0, True, False)),
    OpSpec("solve_triangular", lambda a, b: D.solve_triangular(a + _CSHIFT, b, trans=1), id="solve_triangular-T-rc",
           shapes=((3, 3), (3, 1)), domain=(-1.0, 1.0), kinds="cr", torch_fn=_t_st(1, False, False)),
    OpSpec("solve_triangular", lambda a, b: D.solve_triangular(a + _SHIFT, b, trans="C", unit_diagonal=True),
           id="solve_triangular-C-unit", shapes=((2, 3, 3), (3, 1)), domain=(-1.0, 1.0), kinds="cc",
           torch_fn=_t_st(2, False, True)),
    OpSpec("solve_triangular", lambda c, b: D.cho_solve((c + _CSHIFT, True), b), id="cho_solve",
           shapes=((3, 3), (3,)), domain=(-1.0, 1.0), kinds="cc",
           torch_fn=_tl(lambda t, c, b: t.cholesky_solve(b[:, None], t.tril(c + _c(t, _CSHIFT)))[:, 0])),
    OpSpec("logdet", lambda z: _slogdet_both(z - _CSHIFT), shapes=((2, 3, 3),), domain=_NARROW, imag=_NARROW,
           kinds="c", torch_fn=_tl(lambda t, z: _t_slogdet_both(t, z - _c(t, _CSHIFT)))),
    OpSpec("cholesky", lambda z: cr.linalg.cholesky(_hpd(z)), shapes=((3, 3),), kinds="c",
           torch_fn=_tl(lambda t, z: t.linalg.cholesky(_t_hpd(t, z)))),
    OpSpec("cholesky", lambda z: cr.linalg.cholesky(_hpd(z), upper=True), id="cholesky-upper",
           shapes=((2, 3, 3),), kinds="c", torch_fn=_tl(lambda t, z: t.linalg.cholesky(_t_hpd(t, z), upper=True))),
]
