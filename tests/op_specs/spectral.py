"""Op-table rows for cr.linalg's spectral primitives (eigh, eigvalsh, svd, svdvals) and the composites
built on them. Every row is a gauge-invariant function (eigenvalues, projectors, reconstructions), so
central differences, PyTorch and both modes agree whatever sign/phase LAPACK picks; symmetric inputs
are built inside ``fn`` from the raw sample, with eigenvalues kept apart by a float64 diagonal."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import chainrule as cr
from chainrule.ops import spectral
from tests.op_specs.spec import OpSpec

CR = cr       # chainrule's side of each row: cr.linalg's functions
_SPREAD = np.diag([0.0, 3.0, 6.0])             # eigenvalues ~3 apart: far from degenerate
_NARROW = (-0.5, 0.5)


def _tl(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*xs: Any) -> Any:
        import torch
        return fn(torch, *xs)
    return call


def _herm(m: Any, a: Any) -> Any:
    """(a + a^H) / 2 + diag(0, 3, 6), for chainrule (m = cr) or torch (m = torch)."""
    at = a.mT.conj() if m is not CR else cr.conj(cr.swapaxes(a, -1, -2))
    return (a + at) * 0.5 + (m.tensor(_SPREAD) if m is not CR else _SPREAD)


def _eigh_fn(m: Any, a: Any) -> Any:
    """Eigenvalues, and a projector onto one eigenvector weighted by the eigenvalues' squares."""
    w, v = m.linalg.eigh(_herm(m, a))
    vh = v.mT.conj() if m is not CR else cr.conj(cr.swapaxes(v, -1, -2))
    return (v * (w ** 2)[..., None, :]) @ vh + v[..., :, :1] @ vh[..., :1, :] * w[..., 1:2, None]


def _svd_fn(m: Any, a: Any) -> Any:
    """U diag(s^2) Vh plus the rank-1 part u_1 v_1^H (both invariant under the pairs' signs/phases)."""
    u, s, vh = m.linalg.svd(a, full_matrices=False)
    return (u * (s ** 2)[..., None, :]) @ vh + u[..., :, :1] @ vh[..., :1, :]


def _svd_u_fn(m: Any, a: Any) -> Any:
    """The projector onto the leading left singular vectors (the (I - U U^H) gU S^-1 term for m > n)."""
    u, s, vh = m.linalg.svd(a, full_matrices=False)
    uh = u.mT.conj() if m is not CR else cr.conj(cr.swapaxes(u, -1, -2))
    return u[..., :, :2] @ uh[..., :2, :]


def _svd_v_fn(m: Any, a: Any) -> Any:
    u, s, vh = m.linalg.svd(a, full_matrices=False)
    v = vh.mT.conj() if m is not CR else cr.conj(cr.swapaxes(vh, -1, -2))
    return v[..., :, :2] @ vh[..., :2, :]


def _pinv_fn(m: Any, a: Any) -> Any:
    return m.linalg.pinv(a)


def _lstsq_fn(m: Any, a: Any, b: Any) -> Any:
    return m.linalg.lstsq(a, b)[0] if m is CR else m.linalg.lstsq(a, b, driver="gelsd").solution


def _eigvalsh_vjp_fn(m: Any, a: Any, g: Any) -> Any:
    """V diag(g) V^H, eigvalsh's gradient (chainrule's primitive eigvalsh_vjp of [A; g])."""
    if m is CR:
        return spectral.apply(spectral.EIGVALSH_VJP, (spectral._pack(_herm(m, a), g),), {"UPLO": "L"})
    v = m.linalg.eigh(_herm(m, a))[1]
    return (v * g[..., None, :]) @ v.mT.conj()


def _apart(shape: tuple) -> np.ndarray:
    """A float64 (m, n) diagonal 0, 3, 6: singular values kept apart, as _SPREAD does for eigenvalues."""
    return np.eye(*shape[-2:]) * np.array([0.0, 3.0, 6.0, 9.0])[:shape[-1]]


def _svdvals_vjp_fn(m: Any, a: Any, g: Any) -> Any:
    """U diag(g) Vh, svdvals' gradient (chainrule's primitive svdvals_vjp of [A; g])."""
    a = a + (m.tensor(_apart(a.shape)) if m is not CR else _apart(a.shape))
    if m is CR:
        return spectral.apply(spectral.SVDVALS_VJP, (spectral._pack(a, g),))
    u, _, vh = m.linalg.svd(a, full_matrices=False)
    return (u * g[..., None, :]) @ vh


def _both(fn: Callable[..., Any]) -> tuple:
    return (lambda *xs: fn(CR, *xs)), _tl(fn)


def _row(name: str, fn: Callable[..., Any], **kw: Any) -> OpSpec:
    f, t = _both(fn)
    return OpSpec(name, f, torch_fn=t, **kw)


SPECS: list[OpSpec] = [
    _row("eigh", _eigh_fn, shapes=((3, 3),)),
    _row("eigh", _eigh_fn, id="eigh-batched", shapes=((2, 3, 3),)),
    _row("eigvalsh", lambda m, a: m.linalg.eigvalsh(_herm(m, a)), shapes=((2, 3, 3),)),
    _row("svd", _svd_fn, shapes=((4, 3),)),
    _row("svd", _svd_fn, id="svd-wide-batched", shapes=((2, 3, 4),)),
    _row("svd", _svd_u_fn, id="svd-u-tall", shapes=((4, 3),)),
    _row("svd", _svd_v_fn, id="svd-v-wide", shapes=((3, 4),)),
    _row("svdvals", lambda m, a: m.linalg.svdvals(a), shapes=((2, 4, 3),)),
    _row("eigvalsh_vjp", _eigvalsh_vjp_fn, shapes=((2, 3, 3), (2, 3))),
    _row("svdvals_vjp", _svdvals_vjp_fn, shapes=((4, 3), (3,))),
    _row("svdvals_vjp", _svdvals_vjp_fn, id="svdvals_vjp-wide-batched", shapes=((2, 3, 4), (2, 3))),
    # composites: their rows exercise the primitives they are built on
    _row("pinv", _pinv_fn, shapes=((4, 3),)),
    _row("pinv", _pinv_fn, id="pinv-wide-batched", shapes=((2, 3, 4),)),
    _row("pinv", _lstsq_fn, id="lstsq", shapes=((5, 3), (5, 2))),
    _row("svdvals", lambda m, a: m.linalg.matrix_norm(a, ord="nuc"), id="matrix_norm-nuc", shapes=((2, 3, 4),)),
    _row("svdvals", lambda m, a: m.linalg.cond(a), id="cond", shapes=((3, 3),)),
]

COMPLEX_SPECS: list[OpSpec] = [
    _row("eigh", _eigh_fn, id="eigh-c", shapes=((3, 3),), kinds="c", domain=_NARROW, imag=_NARROW),
    _row("eigvalsh", lambda m, a: m.linalg.eigvalsh(_herm(m, a)), id="eigvalsh-c", shapes=((3, 3),),
         kinds="c", domain=_NARROW, imag=_NARROW),
    _row("svd", _svd_fn, id="svd-c", shapes=((4, 3),), kinds="c"),
    _row("svd", _svd_fn, id="svd-c-wide", shapes=((3, 4),), kinds="c"),
    _row("svd", _svd_u_fn, id="svd-u-c", shapes=((4, 3),), kinds="c"),
    _row("svdvals", lambda m, a: m.linalg.svdvals(a), id="svdvals-c", shapes=((3, 4),), kinds="c"),
    _row("eigvalsh_vjp", _eigvalsh_vjp_fn, id="eigvalsh_vjp-c", shapes=((3, 3), (3,)), kinds="cr", domain=_NARROW,
         imag=_NARROW),
    _row("svdvals_vjp", _svdvals_vjp_fn, id="svdvals_vjp-c", shapes=((4, 3), (3,)), kinds="cr"),
    _row("pinv", _pinv_fn, id="pinv-c", shapes=((4, 3),), kinds="c"),
]
