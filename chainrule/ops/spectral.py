"""Spectral linear algebra: ``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, ``pinv`` (primitives) and the
composites built on them: ``lstsq``, ``cond``, ``matrix_rank``, ``matrix_norm``, ``vector_norm``, ``norm``.

NumPy's names, arguments and results (``EighResult(eigenvalues, eigenvectors)``,
``SVDResult(U, S, Vh)``); batched over leading axes; real and complex; both modes, any order (the
rules are written with chainrule ops). Complex convention as everywhere: for a real loss L of
A = X + iY, A.grad = dL/dX + i dL/dY, so every rule below states G with dL = Re<G, dA>.

Design: the op table has single-output primitives, so a decomposition is ONE primitive whose output
packs its factors into one array, split by cheap getitem views:

    eigh  -> (..., n + 1, n):       row 0 = w (stored in V's dtype), rows 1.. = V
    svd   -> (..., m + 1 + n, p):   rows :m = U, row m = S, rows m+1: = V = Vh^H (zero-padded to p)

so the factors share one node, one forward and one rule; a loss of the eigenvalues alone reaches
the rule with an exactly zero cotangent on the vector block, which the rule detects (eigenvalue-only
losses then never divide by eigenvalue gaps). ``eigvalsh`` and ``svdvals`` are primitives of their
own (no vectors computed forward; their rules recompute them, through ``eigh``/``svd`` when they
must be differentiable again). ``pinv`` is a primitive too, with the Golub-Pereyra (1973) formula,
which needs no singular vectors: it is exact at repeated singular values (orthogonal matrices).

Rules (written from the formulas: Giles 2008, "An extended collection of matrix derivative results
for forward and reverse mode AD", for eigh; Townsend 2016, "Differentiating the singular value
decomposition", and the gauge treatment of PyTorch's ``svd_backward``/``linalg_eig_backward``), with
E_ij = 1 / (w_j - w_i), F-_ij = 1 / (s_j - s_i), F+_ij = 1 / (s_j + s_i) off the diagonal, 0 on it:

    eigh,  A = V diag(w) V^H:
        JVP   P = V^H herm(dA) V,  dw = Re diag(P),  dV = V (E o P)
        VJP   X = V^H gV,  G = V (diag(gw) + E o (X - X^H) / 2) V^H             (Hermitian)
    svd,   A = U diag(s) V^H (thin, k = min(m, n)):
        JVP   P = U^H dA V,  ds = Re diag(P),  J = F- o (P + P^H) / 2,  K = F+ o (P - P^H) / 2
              dU = U (J + K + i diag(Im P_ii / s_i)) + (I - U U^H) dA V S^-1
              dV = V (J - K) + (I - V V^H) dA^H U S^-1
        VJP   XU = U^H gU, XV = V^H gV, KU = XU - XU^H, KV = XV - XV^H,
              G = U (diag(gs) + (F- o (KU + KV) + F+ o (KU - KV)) / 2 + i diag(Im XU_ii / s_i)) V^H
                  + (I - U U^H) gU S^-1 V^H + U S^-1 gV^H (I - V V^H)
              (= Townsend's F o (KU S + S KV) with F = 1 / (s_j^2 - s_i^2), split so that only
              joint rotations of U and V divide by s_j - s_i)
    pinv,  X = A^+:  dX = -X dA X + X X^H dA^H (I - A X) + (I - X A) dA^H X^H X, and its adjoint

(the phase of each complex pair u_i, v_i is put into U, as PyTorch; each VJP is its JVP's adjoint).

Hermitian input: like NumPy (and PyTorch), eigh/eigvalsh read only the ``UPLO`` triangle (and the
real part of the diagonal). The gradient is PyTorch's: the Hermitian G above, the derivative along
Hermitian perturbations. It is the Hermitian part of the "true" gradient of the triangle-reading
map (which is 2 tril(G, -1) + diag(G) for UPLO='L'): the two agree on everything that feeds eigh a
Hermitian matrix, e.g. ``eigh((a + a.mT) / 2)``, but a raw non-Hermitian input's unread triangle gets
half of each off-diagonal gradient although it does not change the result. Likewise the JVP
differentiates along herm(dA) = (dA + dA^H) / 2, so the two modes stay adjoint.

Gauge and degeneracy (the derivative does not exist there; never a silent inf/NaN):
  * a cotangent that depends on the phase of complex eigen/singular vectors (Im diag(V^H gV) not
    ~0, or Im diag(U^H gU) + Im diag(V^H gV) not ~0 for svd, as PyTorch checks) raises;
  * between (nearly) equal eigenvalues (relative gap < max(1e-10, 10 eps)) the VJP raises when the
    vector cotangent reaches that pair (X_ij or X_ji not ~0; for svd the joint part XU + XV, and
    between two zero singular values also XU - XV). That includes losses invariant inside the
    eigenspace: at the degenerate point itself they cannot be told apart from 0/0 limits (e.g. the
    second derivative of an eigenvalue function, or a reconstruction U f(S) Vh), whose value the
    rule cannot know, so it refuses rather than return a wrong number. Losses of the eigenvalues
    alone (eigvalsh, svdvals, eigh/svd with a zero vector cotangent) work there, as does pinv;
  * in forward mode the eigenvectors' tangent does not exist there either: the JVP holds the
    eigenspace's basis fixed (the 1/gap term set to 0), exact for symmetric functions of those
    eigenvalues, and warns;
  * zero singular values with m != n (or complex phases) whose S^-1 terms are needed raise.
``svd(full_matrices=True)`` with m != n: the columns beyond min(m, n) get no gradient (they are not
determined by A); a nonzero cotangent on them raises (PyTorch silently drops it). Their tangent is
the minimal rotation keeping them orthogonal to the thin factor.

FLOPs: eigh 9 n^3, svd and pinv 4 m n k + 8 k^3 (per matrix; LAPACK's usual leading terms).
"""
from __future__ import annotations

import warnings
from typing import Any, NamedTuple

from .._backend import np
from ..batched import batched_like, whole_batch
from ..errors import ShapeError, VmapError
from ..tensor import Tensor
from ..tensor import wrap as _wrap
from ._batching import batch_unary, set_batch
from ._registry import apply, defprim, raw
from .elementwise import abs, astype, conj, sign, where
from .linalg import _per_batch, inv, matmul
from .linalg import norm as _vector_and_simple_norm
from .reduction import amax, amin, sum
from .shape import (
    concatenate,
    diagonal,
    expand_dims,
    imag,
    moveaxis,
    ravel,
    real,
    reshape,
    swapaxes,
    take_along_axis,
)

_NoValue = object()


# ----- small helpers (ndarrays in the fast path, Tensors when the rule is recorded) -----
def _is_complex(x: Any) -> bool:
    return raw(x).dtype.kind == "c"


def _mT(x: Any) -> Any:
    return swapaxes(x, -1, -2)


def _mH(x: Any) -> Any:
    return conj(_mT(x)) if _is_complex(x) else _mT(x)


def _herm(t: Any) -> Any:
    return (t + _mH(t)) * 0.5


def _diag(x: Any) -> Any:
    return diagonal(x, 0, -2, -1)


def _diag_embed(d: Any) -> Any:
    n = raw(d).shape[-1]
    return expand_dims(d, -1) * np.eye(n, dtype=raw(d).dtype)


def _row(s: Any) -> Any:     # s_j along the columns
    return expand_dims(s, -2)


def _col(s: Any) -> Any:     # s_i along the rows
    return expand_dims(s, -1)


def _eps(dtype: Any) -> float:
    try:
        return float(np.finfo(dtype).eps)
    except (TypeError, ValueError):           # bfloat16 / FP8 without NumPy finfo
        return 2.0 ** -7


def _gap_rtol(dtype: Any) -> float:
    return max(1e-10, 10 * _eps(dtype))


def _nonzero(x: Any) -> bool:
    return x is not None and bool(np.any(whole_batch(x)))


def _as_dtype(x: Any, dtype: Any) -> Any:
    return x if raw(x).dtype == dtype else astype(x, dtype)


def _max_abs(x: Any, axes: tuple = (-2, -1)) -> Any:
    xd = whole_batch(x)
    return np.abs(xd).max(axis=axes, keepdims=True, initial=0) if xd.size else np.zeros(())


def _square(a: Any, op: str) -> tuple:
    shape = np.shape(raw(a))
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ShapeError(f"{op}: expects square matrices (..., n, n), got shape {shape}")
    return shape


def _matrices(a: Any, op: str) -> tuple:
    shape = np.shape(raw(a))
    if len(shape) < 2:
        raise ShapeError(f"{op}: expects matrices (..., m, n) of at least 2 dimensions, got shape {shape}")
    return shape


def _floating(a: Any) -> Any:
    """Integer and boolean inputs as float64 (NumPy's linalg does the same)."""
    d = raw(a)
    if not hasattr(d, "dtype"):
        d = np.asarray(d)
        a = d
    return astype(a, np.float64) if d.dtype.kind in "biu" else a


def _gauge_error(op: str, what: str, value: float) -> ValueError:
    return ValueError(
        f"{op}: the loss depends on the phase of {what} (complex {what} are only defined up to a factor "
        f"e^(i phi) each; the imaginary part of the cotangent's diagonal in the {what}' basis is "
        f"{value:.3g}, not 0), so its gradient is ill-defined, as in PyTorch. Use a phase-invariant loss: "
        f"|v|, v v^H, reconstructions, or the {'eigenvalues' if op.startswith('eig') else 'singular values'}")


def _first(mask: Any, shape: tuple) -> tuple:
    """The first True entry of ``mask`` as an index into an array of ``shape`` that it broadcasts
    (``mask`` may carry more leading batch axes: a cotangent batched by vmap)."""
    idx = np.argwhere(mask)[0][mask.ndim - len(shape):]
    return tuple(int(min(i, n - 1)) for i, n in zip(idx, shape))


def _degenerate_error(op: str, kind: str, a: float, b: float, rel: float) -> ValueError:
    vec = "eigenvectors" if kind == "eigenvalues" else "singular vectors"
    return ValueError(
        f"{op}: the derivative with respect to the {vec} does not exist here: {kind} {a:.8g} and {b:.8g} "
        f"are (nearly) equal (relative gap {rel:.2g}), and the loss depends on which basis of that "
        f"{'eigenspace' if kind == 'eigenvalues' else 'singular subspace'} is returned. Use a loss that is "
        f"invariant inside each degenerate subspace (functions of the {kind} alone, e.g. "
        f"{'eigvalsh' if kind == 'eigenvalues' else 'svdvals'}, projectors onto whole subspaces, "
        f"reconstructions), or perturb the matrix to split the {kind}")


# ----- eigh -----
def _eigh_forward(a: Any, UPLO: str) -> Any:
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return np.concatenate([w[..., None, :].astype(v.dtype), v], axis=-2)


def _split_eigh(out: Any) -> tuple:
    w = out[..., 0, :]
    return (real(w) if _is_complex(w) else w), out[..., 1:, :]


def _inverse_gaps(w: Any, x: Any, op: str, forward: bool = False) -> Any:
    """E_ij = 1 / (w_j - w_i) off the diagonal, 0 on it and between (nearly) equal eigenvalues. There
    the cotangent ``x`` = V^H gV (the tangent P in forward mode) must vanish on the pair (both x_ij
    and x_ji): else the derivative does not exist, or is a 0/0 limit that cannot be evaluated at this
    point (reverse mode raises; forward mode warns and holds the eigenspace's basis fixed)."""
    wd = whole_batch(w)
    n = wd.shape[-1]
    gap = wd[..., None, :] - wd[..., :, None]
    top = np.abs(wd).max(axis=-1, initial=0)[..., None, None]
    off = ~np.eye(n, dtype=bool)
    near = (np.abs(gap) <= _gap_rtol(wd.dtype) * top) & off
    if near.any():
        xd = np.abs(whole_batch(x))
        xd = np.maximum(xd, np.swapaxes(xd, -1, -2))
        bad = near & (xd > np.sqrt(_eps(wd.dtype)) * _max_abs(x))
        if bad.any():
            idx = _first(bad, near.shape)
            wi, wj = wd[idx[:-1]], wd[idx[:-2] + (idx[-1],)]
            rel = abs(float(wj) - float(wi)) / max(float(top[idx[:-2] + (0, 0)]), 1e-300)
            if not forward:
                raise _degenerate_error(op, "eigenvalues", float(wi), float(wj), rel)
            warnings.warn(f"{op}: forward-mode tangent of the eigenvectors at (nearly) equal eigenvalues "
                          f"{float(wi):.8g} and {float(wj):.8g} does not exist; the basis of that eigenspace is "
                          f"held fixed (exact for symmetric functions of its eigenvalues, e.g. their sum, and "
                          f"for the projector onto the whole eigenspace; use eigvalsh for eigenvalues only)",
                          RuntimeWarning, stacklevel=2)
    ok = off & ~near
    diff = expand_dims(w, -2) - expand_dims(w, -1)
    return where(ok, 1.0 / where(ok, diff, 1.0), 0.0)


def _eigh_vjp(g: Any, out: Any, a: Any, UPLO: str) -> Any:
    w, v = _split_eigh(out)
    gw, gv = real(g[..., 0, :]), g[..., 1:, :]
    vh = _mH(v)
    inner = _diag_embed(gw)
    if _nonzero(gv):
        x = matmul(vh, gv)
        if _is_complex(x):
            im = np.abs(np.imag(np.diagonal(whole_batch(x), 0, -2, -1)))
            if (im > np.sqrt(_eps(raw(x).dtype)) * _max_abs(x)[..., 0]).any():
                raise _gauge_error("eigh", "eigenvectors", float(im.max()))
        inner = inner + _inverse_gaps(w, x, "eigh") * ((x - _mH(x)) * 0.5)
    return matmul(matmul(v, inner), vh)


def _eigh_jvp(t: Any, out: Any, a: Any, UPLO: str) -> Any:
    w, v = _split_eigh(out)
    p = matmul(matmul(_mH(v), _herm(t)), v)
    dw = _as_dtype(real(_diag(p)), raw(out).dtype)
    dv = matmul(v, _inverse_gaps(w, p, "eigh", forward=True) * p)
    return concatenate([expand_dims(dw, -2), dv], axis=-2)


def _eig_flops(out: Any, a: Any, **params: Any) -> int:
    n = np.shape(a)[-1]
    return 9 * int(np.size(a)) * int(n)


EIGH = defprim("eigh", _eigh_forward, vjps=(_eigh_vjp,), jvps=(_eigh_jvp,), saves="out", flops=_eig_flops,
               kind="matmul", autocast="float32", complex="own",
               hint="eigh expects Hermitian (symmetric) matrices (..., n, n); only the UPLO triangle is read.")


def _eigvalsh_vjp(g: Any, out: Any, a: Any, UPLO: str) -> Any:
    v = eigh(a, UPLO).eigenvectors
    return matmul(v * _row(g), _mH(v))


def _eigvalsh_jvp(t: Any, out: Any, a: Any, UPLO: str) -> Any:
    v = eigh(a, UPLO).eigenvectors
    return real(sum(conj(v) * matmul(_herm(t), v), axis=-2))


EIGVALSH = defprim("eigvalsh", lambda a, UPLO: np.linalg.eigvalsh(a, UPLO=UPLO), vjps=(_eigvalsh_vjp,),
                   jvps=(_eigvalsh_jvp,), saves="x", flops=_eig_flops, kind="matmul", autocast="float32",
                   complex="own", hint="eigvalsh expects Hermitian (symmetric) matrices (..., n, n).")


class EighResult(NamedTuple):
    """``(eigenvalues, eigenvectors)``, as ``numpy.linalg.eigh``."""
    eigenvalues: Any
    eigenvectors: Any


def _uplo(UPLO: str, op: str) -> str:
    u = str(UPLO).upper()
    if u not in ("L", "U"):
        raise ValueError(f"{op}: UPLO must be 'L' or 'U', got {UPLO!r}")
    return u


def eigh(a: Any, UPLO: str = "L") -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices, as ``numpy.linalg.eigh``; only
    the ``UPLO`` triangle is read. Gradients as PyTorch's (see the module docstring for degenerate
    eigenvalues and complex phases).

    >>> import chainrule as cr
    >>> a = cr.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=cr.float64, requires_grad=True)
    >>> w, v = cr.linalg.eigh(a)
    >>> w.detach()
    tensor([1., 3.], dtype=float64)
    >>> (w ** 2).sum().backward(); a.grad           # d tr(A^2) = 2 A
    tensor([[4., 2.],
            [2., 4.]], dtype=float64)
    """
    UPLO = _uplo(UPLO, "eigh")
    a = _floating(a)
    _square(a, "eigh")
    if not isinstance(a, Tensor):
        return EighResult(*np.linalg.eigh(a, UPLO=UPLO))
    packed = apply(EIGH, (a,), {"UPLO": UPLO})
    w, v = _split_eigh(packed)
    return EighResult(w, v)


def eigvalsh(a: Any, UPLO: str = "L") -> Any:
    """Eigenvalues (ascending) of Hermitian matrices, as ``numpy.linalg.eigvalsh``; differentiable at
    repeated eigenvalues too (for symmetric functions of them).

    >>> import chainrule as cr
    >>> cr.linalg.eigvalsh(cr.tensor([[2.0, 0.0], [0.0, 1.0]]))
    tensor([1., 2.])
    """
    UPLO = _uplo(UPLO, "eigvalsh")
    a = _floating(a)
    _square(a, "eigvalsh")
    return apply(EIGVALSH, (a,), {"UPLO": UPLO})


# ----- svd -----
def _svd_forward(a: Any, full_matrices: bool, m: int) -> Any:
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    n = vh.shape[-1]
    p = max(u.shape[-1], vh.shape[-2])
    out = np.zeros(a.shape[:-2] + (m + 1 + n, p), dtype=u.dtype)
    out[..., :m, :u.shape[-1]] = u
    out[..., m, :s.shape[-1]] = s
    out[..., m + 1:, :vh.shape[-2]] = np.conj(np.swapaxes(vh, -1, -2))
    return out


def _svd_sizes(out: Any, full_matrices: bool, m: int) -> tuple:
    n = raw(out).shape[-2] - m - 1
    k = min(m, n)
    return n, k, (m if full_matrices else k), (n if full_matrices else k)


def _split_svd(out: Any, full_matrices: bool, m: int) -> tuple:
    """(U, S, V) with U (m, m or k), V (n, n or k); V = Vh^H."""
    n, k, ku, kv = _svd_sizes(out, full_matrices, m)
    return out[..., :m, :ku], real(out[..., m, :k]), out[..., m + 1:, :kv]


def _svd_checks(s: Any, op: str, joint: Any, anti: Any, forward: bool = False) -> tuple:
    """F- = 1 / (s_j - s_i) and F+ = 1 / (s_j + s_i) off the diagonal, and S^-1 (0 at (nearly) zero
    singular values). F- is 0 between (nearly) equal singular values, F+ between two (nearly) zero
    ones; there ``joint`` (XU + XV, or the tangent's P + P^H) resp. ``anti`` (XU - XV, P - P^H) must
    vanish on the pair, else reverse mode raises and forward mode warns and holds the basis fixed."""
    sd = whole_batch(s)
    k = sd.shape[-1]
    rtol = _gap_rtol(sd.dtype)
    top = sd.max(axis=-1, initial=0)[..., None, None]
    off = ~np.eye(k, dtype=bool)
    zero = sd <= rtol * top[..., 0]
    near = (np.abs(sd[..., None, :] - sd[..., :, None]) <= rtol * top) & off
    both_zero = near & zero[..., :, None] & zero[..., None, :]
    if near.any():
        small = np.sqrt(_eps(sd.dtype))

        def flagged(z: Any, where_: Any) -> Any:
            zd = np.abs(whole_batch(z))
            zd = np.maximum(zd, np.swapaxes(zd, -1, -2))
            return where_ & (zd > small * _max_abs(z))
        bad = flagged(joint, near) if joint is not None else np.zeros_like(near)
        if anti is not None:
            bad |= flagged(anti, both_zero)
        if bad.any():
            idx = _first(bad, near.shape)
            si, sj = float(sd[idx[:-1]]), float(sd[idx[:-2] + (idx[-1],)])
            rel = abs(si - sj) / max(float(top[idx[:-2] + (0, 0)]), 1e-300)
            if not forward:
                raise _degenerate_error(op, "singular values", si, sj, rel)
            warnings.warn(f"{op}: forward-mode tangent of the singular vectors at (nearly) equal singular "
                          f"values {si:.8g} and {sj:.8g} does not exist; the basis of that subspace is held "
                          f"fixed (exact for symmetric functions of those singular values and whole-subspace "
                          f"projectors; use svdvals for singular values only)", RuntimeWarning, stacklevel=3)
    ok_m = off & ~near
    ok_p = off & ~both_zero
    f_m = where(ok_m, 1.0 / where(ok_m, _row(s) - _col(s), 1.0), 0.0)
    f_p = where(ok_p, 1.0 / where(ok_p, _row(s) + _col(s), 1.0), 0.0)
    s_inv = where(zero, 0.0, 1.0 / where(zero, 1.0, s))
    return f_m, f_p, s_inv, zero


def _zero_sv_error(op: str, what: str) -> ValueError:
    return ValueError(
        f"{op}: the derivative with respect to the {what} does not exist here: the matrix has (nearly) zero "
        f"singular values and the loss depends on the corresponding singular vectors, which are not determined "
        f"by the matrix (their derivative has a 1/s term). Use a loss of the singular values or of the "
        f"reconstruction U diag(s) Vh, or regularise the matrix")


def _check_zero_columns(r: Any, zero: Any, scale: Any, op: str) -> None:
    """Columns of ``r`` multiplied by 1/s at a zero singular value must be ~0."""
    if zero.any():
        col = np.abs(whole_batch(r)).max(axis=-2, initial=0)
        if (zero & (col > np.sqrt(_eps(raw(r).dtype)) * scale[..., 0])).any():
            raise _zero_sv_error(op, "singular vectors")


def _svd_core_vjp(gu: Any, gs: Any, gv: Any, u: Any, s: Any, v: Any, op: str) -> Any:
    m, k = raw(u).shape[-2:]
    n = raw(v).shape[-2]
    vh = _mH(v)
    any_u, any_v = _nonzero(gu), _nonzero(gv)
    if not any_u and not any_v:
        return matmul(u * _row(gs), vh)
    cplx = _is_complex(u)
    xu = matmul(_mH(u), gu) if any_u else None
    xv = matmul(vh, gv) if any_v else None
    if cplx:
        im = 0.0
        if any_u:
            im = im + np.imag(np.diagonal(whole_batch(xu), 0, -2, -1))
        if any_v:
            im = im + np.imag(np.diagonal(whole_batch(xv), 0, -2, -1))
        scale = (_max_abs(xu)[..., 0] if any_u else 0.0) + (_max_abs(xv)[..., 0] if any_v else 0.0)
        if (np.abs(im) > np.sqrt(_eps(raw(u).dtype)) * scale).any():
            raise _gauge_error(op, "singular vectors", float(np.abs(im).max()))
    # Y off the diagonal: (F- o (KU + KV) + F+ o (KU - KV)) / 2, K = X - X^H (zero parts skipped)
    xs = xu if not any_v else xv if not any_u else None
    joint = xs if xs is not None else xu + xv
    anti = xs if xs is not None else xu - xv
    f_m, f_p, s_inv, zero = _svd_checks(s, op, joint, anti)
    kj = joint - _mH(joint)
    ka = kj if xs is not None else anti - _mH(anti)
    if any_v and not any_u:
        ka = -ka
    inner = _diag_embed(gs) + (f_m * kj + f_p * ka) * 0.5
    if cplx and any_u:
        imu = imag(_diag(xu))
        tol = np.sqrt(_eps(raw(u).dtype)) * _max_abs(xu)[..., 0]
        if zero.any() and (zero & (np.abs(whole_batch(imu)) > tol)).any():
            raise _zero_sv_error(op, "phases of the singular vectors")
        inner = inner + _diag_embed(imu * s_inv) * 1j
    ga = matmul(matmul(u, inner), vh)
    if m > k and any_u:
        r = gu - matmul(u, xu)
        _check_zero_columns(r, zero, _max_abs(gu), op)
        ga = ga + matmul(r * _row(s_inv), vh)
    if n > k and any_v:
        r = gv - matmul(v, xv)
        _check_zero_columns(r, zero, _max_abs(gv), op)
        ga = ga + matmul(u * _row(s_inv), _mH(r))
    return ga


def _svd_vjp(g: Any, out: Any, a: Any, full_matrices: bool, m: int) -> Any:
    n, k, ku, kv = _svd_sizes(out, full_matrices, m)
    u, s, v = _split_svd(out, False, m) if not full_matrices else (out[..., :m, :k], real(out[..., m, :k]),
                                                                    out[..., m + 1:, :k])
    gd = whole_batch(g)
    if full_matrices and (np.any(gd[..., :m, k:ku]) or np.any(gd[..., m + 1:, k:kv])):
        raise ValueError(
            f"svd: the gradient with respect to the columns of U (or rows of Vh) beyond min(m, n) = {k} of a "
            f"{m}x{n} matrix does not exist: with full_matrices=True those complete an orthonormal basis "
            f"that the matrix does not determine. Use full_matrices=False, or a loss that does not read them")
    gu, gs, gv = g[..., :m, :k], real(g[..., m, :k]), g[..., m + 1:, :k]
    return _svd_core_vjp(gu, gs, gv, u, s, v, "svd")


def _pad_cols(x: Any, p: int) -> Any:
    w = raw(x).shape[-1]
    if w == p:
        return x
    return concatenate([x, np.zeros(raw(x).shape[:-1] + (p - w,), dtype=raw(x).dtype)], axis=-1)


def _svd_jvp(t: Any, out: Any, a: Any, full_matrices: bool, m: int) -> Any:
    n, k, ku, kv = _svd_sizes(out, full_matrices, m)
    p = raw(out).shape[-1]
    dtype = raw(out).dtype
    u, s, v = out[..., :m, :k], real(out[..., m, :k]), out[..., m + 1:, :k]
    dp = matmul(matmul(_mH(u), t), v)
    dph = _mH(dp)
    ds = real(_diag(dp))
    sym_p, skew_p = dp + dph, dp - dph
    f_m, f_p, s_inv, zero = _svd_checks(s, "svd", sym_p, skew_p, forward=True)
    rot_joint, rot_anti = f_m * sym_p * 0.5, f_p * skew_p * 0.5
    du = matmul(u, rot_joint + rot_anti)
    dv = matmul(v, rot_joint - rot_anti)
    if _is_complex(dp):
        du = du + u * _row(imag(_diag(dp)) * s_inv) * 1j
    if m > k:
        du = du + (matmul(t, v) - matmul(u, dp)) * _row(s_inv)
    if n > k:
        dv = dv + (matmul(_mH(t), u) - matmul(v, dph)) * _row(s_inv)
    if full_matrices and ku > k:         # the completion: the minimal rotation keeping it orthogonal to U
        u_perp = out[..., :m, k:ku]
        du = concatenate([du, -matmul(u, matmul(_mH(du), u_perp))], axis=-1)
    if full_matrices and kv > k:
        v_perp = out[..., m + 1:, k:kv]
        dv = concatenate([dv, -matmul(v, matmul(_mH(dv), v_perp))], axis=-1)
    row = _pad_cols(expand_dims(_as_dtype(ds, dtype), -2), p)
    return concatenate([_pad_cols(du, p), row, _pad_cols(dv, p)], axis=-2)


def _svd_flops(out: Any, a: Any, **params: Any) -> int:
    m, n = np.shape(a)[-2:]
    k = min(m, n)
    batch = int(np.size(a)) // max(m * n, 1)
    return batch * (4 * m * n * k + 8 * k ** 3)


SVD = defprim("svd", _svd_forward, vjps=(_svd_vjp,), jvps=(_svd_jvp,), saves="out", flops=_svd_flops,
              kind="matmul", autocast="float32", complex="own", hint="svd expects matrices (..., m, n).")


def _svdvals_vjp(g: Any, out: Any, a: Any) -> Any:
    u, _, vh = svd(a, full_matrices=False)
    return matmul(u * _row(g), vh)


def _svdvals_jvp(t: Any, out: Any, a: Any) -> Any:
    u, _, vh = svd(a, full_matrices=False)
    return real(sum(conj(u) * matmul(t, _mH(vh)), axis=-2))


SVDVALS = defprim("svdvals", lambda a: np.linalg.svd(a, compute_uv=False), vjps=(_svdvals_vjp,),
                  jvps=(_svdvals_jvp,), saves="x", flops=_svd_flops, kind="matmul", autocast="float32",
                  complex="own", hint="svdvals expects matrices (..., m, n).")


class SVDResult(NamedTuple):
    """``(U, S, Vh)``, as ``numpy.linalg.svd``."""
    U: Any
    S: Any
    Vh: Any


def _hermitian_svd(a: Any, compute_uv: bool) -> Any:
    """NumPy's hermitian=True path: from eigh, |w| sorted descending, the signs moved into Vh."""
    if not compute_uv:
        s = abs(eigvalsh(a))
        return _take_last(s, _descending(s))
    w, v = eigh(a)
    sgn = sign(w)
    s = abs(w)
    order = _descending(s)
    sgn = _take_last(sgn, order)
    s = _take_last(s, order)
    u = _take_last(v, order, rows=True)
    return SVDResult(u, s, _mH(u * _row(sgn)))


def _descending(s: Any) -> Any:
    return _per_batch(lambda v: np.argsort(v, axis=-1)[..., ::-1], s)


def _take_last(x: Any, order: Any, rows: bool = False) -> Any:
    """``x`` permuted along its last axis by ``order`` (per vector, or for every row of each matrix
    with ``rows``), as ``take_along_axis``; a batched ``order`` gathers through getitem."""
    if not (isinstance(order, Tensor) and order._level):
        return take_along_axis(x, np.broadcast_to(order[..., None, :], raw(x).shape) if rows else order, -1)
    shape = np.shape(raw(x))
    grids = list(np.ogrid[tuple(slice(n) for n in shape)])
    grids[-1] = expand_dims(order, -2) if rows else order
    return x[tuple(grids)]


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    """Singular value decomposition, as ``numpy.linalg.svd``: ``SVDResult(U, S, Vh)``, or S alone for
    ``compute_uv=False``. Gradients as PyTorch's: S always; U and Vh of the thin factors (a nonzero
    cotangent on the extra columns of ``full_matrices=True`` raises).

    >>> import chainrule as cr
    >>> a = cr.tensor([[3.0, 0.0], [0.0, -2.0]], requires_grad=True)
    >>> u, s, vh = cr.linalg.svd(a)
    >>> s.detach()
    tensor([3., 2.])
    >>> s.sum().backward(); a.grad                 # d ||A||_* = U Vh
    tensor([[ 1.,  0.],
            [ 0., -1.]])
    """
    a = _floating(a)
    shape = _matrices(a, "svd")
    if hermitian:
        _square(a, "svd")
        return _hermitian_svd(a, compute_uv)
    if not compute_uv:
        return apply(SVDVALS, (a,))
    if not isinstance(a, Tensor):
        return SVDResult(*np.linalg.svd(a, full_matrices=full_matrices))
    m, n = shape[-2:]
    full = bool(full_matrices) and m != n
    packed = apply(SVD, (a,), {"full_matrices": full, "m": m})
    u, s, v = _split_svd(packed, full, m)
    return SVDResult(u, s, _mH(v))


def svdvals(a: Any) -> Any:
    """Singular values (descending), as ``numpy.linalg.svdvals``; differentiable at repeated ones too.

    >>> import chainrule as cr
    >>> cr.linalg.svdvals(cr.tensor([[0.0, 2.0], [1.0, 0.0]]))
    tensor([2., 1.])
    """
    a = _floating(a)
    _matrices(a, "svdvals")
    return apply(SVDVALS, (a,))


# ----- composites -----
for _prim in (EIGH, EIGVALSH, SVD, SVDVALS):
    set_batch(_prim, batch_unary)


def _pinv_vjp(g: Any, out: Any, a: Any, rcond: Any, hermitian: bool) -> Any:
    # G = -X^H g X^H + (I - A X) g^H X X^H + X^H X g^H (I - X A), the adjoint of the JVP below
    xh, gh = _mH(out), _mH(g)
    h = matmul(gh, matmul(out, xh))
    q = matmul(xh, matmul(out, gh))
    ga = -matmul(matmul(xh, g), xh) + h - matmul(a, matmul(out, h)) + q - matmul(matmul(q, out), a)
    return _herm(ga) if hermitian else ga


def _pinv_jvp(t: Any, out: Any, a: Any, rcond: Any, hermitian: bool) -> Any:
    # Golub & Pereyra (1973): dX = -X dA X + X X^H dA^H (I - A X) + (I - X A) dA^H X^H X
    if hermitian:
        t = _herm(t)
    xh, th = _mH(out), _mH(t)
    r = matmul(matmul(out, xh), th)
    q = matmul(th, matmul(xh, out))
    return -matmul(matmul(out, t), out) + r - matmul(matmul(r, a), out) + q - matmul(out, matmul(a, q))


PINV = defprim("pinv", lambda a, rcond, hermitian: np.linalg.pinv(a, rcond=rcond, hermitian=hermitian),
               vjps=(_pinv_vjp,), jvps=(_pinv_jvp,), saves="x out", flops=lambda out, a, **p: _svd_flops(out, a),
               kind="matmul", autocast="float32", complex="own", hint="pinv expects matrices (..., m, n).")
set_batch(PINV, batch_unary)


def pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _NoValue) -> Any:
    """Moore-Penrose pseudo-inverse, as ``numpy.linalg.pinv`` (same ``rcond``/``rtol`` cutoffs, relative
    to the largest singular value). Its derivative (Golub & Pereyra 1973) holds where the rank is
    locally constant: the singular values below the cutoff are taken as exact zeros. It needs no
    singular vectors, so repeated singular values (orthogonal matrices, the identity) are fine.

    >>> import chainrule as cr
    >>> cr.linalg.pinv(cr.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5, 0. ],
            [0. , 0. ]])
    """
    a = _floating(a)
    shape = _matrices(a, "pinv")
    if hermitian:
        _square(a, "pinv")
    dtype = raw(a).dtype
    if rcond is None:
        if rtol is _NoValue:
            rcond = 1e-15
        elif rtol is None:
            rcond = max(shape[-2:]) * _eps(dtype)
        else:
            rcond = raw(rtol)
    elif rtol is not _NoValue:
        raise ValueError("pinv: `rtol` and `rcond` can't be both set.")
    rcond = raw(rcond)
    rcond = float(rcond) if np.ndim(rcond) == 0 else np.asarray(rcond)
    return apply(PINV, (a,), {"rcond": rcond, "hermitian": bool(hermitian)})


def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple:
    """Least-squares solution of ``a @ x = b``, as ``numpy.linalg.lstsq``: ``(x, residuals, rank, s)``.
    x, residuals and s are differentiable (x away from rank changes); rank is an integer.

    >>> import chainrule as cr
    >>> x, res, rank, s = cr.linalg.lstsq(cr.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]),
    ...                                    cr.tensor([1.0, 2.0, 3.0]))
    >>> x, res, int(rank)
    (tensor([1., 2.]), tensor([9.]), 2)
    """
    a, b = _floating(a), _floating(b)
    sa, sb = np.shape(raw(a)), np.shape(raw(b))
    if len(sa) != 2 or len(sb) not in (1, 2):
        raise ShapeError(f"lstsq: expects a 2-D a and a 1-D or 2-D b (NumPy's lstsq is not batched), "
                         f"got shapes {sa} and {sb}")
    m, n = sa
    if sb[0] != m:
        raise ShapeError(f"lstsq: incompatible dimensions: a is {sa}, b is {sb} (b.shape[0] must be {m})")
    is_1d = len(sb) == 1
    b2 = expand_dims(b, -1) if is_1d else b
    dtype = np.result_type(raw(a).dtype, raw(b).dtype)
    real_dtype = np.finfo(dtype).dtype if dtype.kind == "c" else dtype
    if rcond is None:
        rcond = _eps(dtype) * max(m, n)
    elif rcond < 0:
        rcond = _eps(dtype)
    tracked = isinstance(a, Tensor) or isinstance(b, Tensor)
    if m == 0 or n == 0 or (not is_1d and sb[-1] == 0):
        x, res, rank, s = np.linalg.lstsq(raw(a), raw(b), rcond=rcond)
        return tuple(_wrap(r) for r in (x, res)) + (rank, _wrap(s)) if tracked else (x, res, rank, s)
    s = svdvals(a)
    rank = _per_batch(lambda v: np.count_nonzero(v > rcond * v.max(axis=-1, keepdims=True, initial=0),
                                                 axis=-1).astype(np.int32), s)
    ranks = whole_batch(rank)
    if ranks.ndim and m > n and (ranks == n).any() and not (ranks == n).all():
        raise VmapError("lstsq inside cr.vmap: the residuals' shape depends on the rank, and some examples "
                        "have full column rank and some not; compute b - a @ x instead")
    x = matmul(pinv(a, rcond=rcond), b2)
    x = _as_dtype(x, dtype)
    if (ranks == n).all() and m > n:
        r = b2 - matmul(a, x)
        res = sum(real(r * conj(r)) if dtype.kind == "c" else r * r, axis=0)
        res = _as_dtype(res, real_dtype)
    else:
        res = np.array([], dtype=real_dtype)
        res = _wrap(res) if tracked else res
    if is_1d:
        x = x[..., 0]
    return x, res, rank, _as_dtype(s, real_dtype)


def matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None) -> Any:
    """Rank by SVD, as ``numpy.linalg.matrix_rank`` (an int or an int array; no gradient).

    >>> import chainrule as cr
    >>> int(cr.linalg.matrix_rank(cr.tensor([[1.0, 2.0], [2.0, 4.0]])))
    1
    """
    return _per_batch(lambda v: np.linalg.matrix_rank(np.asarray(v), tol=None if tol is None else raw(tol),
                                                      hermitian=hermitian, rtol=None if rtol is None else raw(rtol)),
                      A)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)


def _matrix_axes(x: Any, axis: Any, op: str) -> tuple:
    ndim = len(np.shape(raw(x)))
    if not isinstance(axis, (tuple, list)) or len(axis) != 2:
        raise ValueError(f"{op}: axis must be a pair of axes, got {axis!r}")
    a0, a1 = (int(a) % ndim if -ndim <= int(a) < ndim else None for a in axis)
    if a0 is None or a1 is None or a0 == a1:
        raise ValueError(f"{op}: invalid axis {axis!r} for an array of {ndim} dimensions")
    return a0, a1


def matrix_norm(x: Any, ord: Any = "fro", axis: tuple = (-2, -1), keepdims: bool = False) -> Any:
    """Matrix norms ('fro', 'nuc', 2, -2, 1, -1, inf, -inf) over ``axis``, as ``numpy.linalg.norm``
    with a 2-tuple axis (and ``torch.linalg.matrix_norm``); 'nuc', 2, -2 from the singular values.

    >>> import chainrule as cr
    >>> cr.linalg.matrix_norm(cr.tensor([[3.0, 0.0], [0.0, -4.0]]), ord="nuc")
    tensor(7.)
    """
    a0, a1 = _matrix_axes(x, axis, "matrix_norm")
    if not any(ord is o or (not isinstance(ord, str) and not isinstance(o, str) and ord == o)
               or (isinstance(ord, str) and ord == o) for o in _MATRIX_ORDS):
        raise ValueError(f"matrix_norm: invalid norm order {ord!r} for matrices; use one of 'fro', 'nuc', "
                         f"2, -2, 1, -1, inf, -inf")
    x = _floating(x)
    if ord == "fro" or ord in (1, -1, np.inf, -np.inf):
        return _vector_and_simple_norm(x, ord, (a0, a1), keepdims)
    s = svdvals(moveaxis(x, (a0, a1), (-2, -1)))
    r = sum(s, axis=-1) if ord == "nuc" else amax(s, axis=-1) if ord == 2 else amin(s, axis=-1)
    if keepdims:
        shape = list(np.shape(raw(x)))
        shape[a0] = shape[a1] = 1
        r = reshape(r, tuple(shape))
    return r


def vector_norm(x: Any, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Any:
    """Vector p-norm over ``axis`` (all axes by default, or several: flattened together), as
    ``numpy.linalg.vector_norm`` / ``torch.linalg.vector_norm``.

    >>> import chainrule as cr
    >>> cr.linalg.vector_norm(cr.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    """
    x = _floating(x)
    shape = np.shape(raw(x))
    ndim = len(shape)
    if axis is None:
        axes = tuple(range(ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(int(a) % ndim for a in axis)
    else:
        axes = (int(axis) % ndim,)
    if len(set(axes)) != len(axes):
        raise ValueError(f"vector_norm: repeated axis in {axis!r}")
    if len(axes) == 1:
        return _vector_and_simple_norm(x, ord, axes[0], keepdims)
    keep = [a for a in range(ndim) if a not in axes]
    flat = reshape(moveaxis(x, axes, tuple(range(ndim - len(axes), ndim))) if ndim else ravel(x),
                   tuple(shape[a] for a in keep) + (-1,))
    r = _vector_and_simple_norm(flat, ord, -1, False)
    if keepdims:
        r = reshape(r, tuple(1 if a in axes else shape[a] for a in range(ndim)))
    return r


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``numpy.linalg.norm``: vector norms and every matrix norm ('nuc', 2 and -2 by singular values).

    >>> import chainrule as cr
    >>> cr.linalg.norm(cr.tensor([[1.0, 0.0], [0.0, 2.0]]), ord=2)
    tensor(2.)
    """
    ndim = len(np.shape(raw(x)))
    if isinstance(ord, str) or (ord is not None and ord in (2, -2)):
        matrix_axes = axis if isinstance(axis, (tuple, list)) and len(axis) == 2 else (
            (0, 1) if axis is None and ndim == 2 else None)
        if matrix_axes is not None and ord in ("nuc", 2, -2):
            return matrix_norm(x, ord, tuple(matrix_axes), keepdims)
    return _vector_and_simple_norm(x, ord, axis, keepdims)


def cond(x: Any, p: Any = None) -> Any:
    """Condition number, as ``numpy.linalg.cond``: p None/2/-2 from the singular values, the others
    ('fro', 'nuc', 1, -1, inf, -inf) as norm(x, p) * norm(inv(x), p); inf for singular matrices.

    >>> import chainrule as cr
    >>> cr.linalg.cond(cr.tensor([[2.0, 0.0], [0.0, 0.5]]))
    tensor(4.)
    """
    x = _floating(x)
    _matrices(x, "cond")
    if p is None or (not isinstance(p, str) and p in (2, -2)):
        s = svdvals(x)
        with np.errstate(all="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        _square(x, "cond")
        try:
            r = matrix_norm(x, p) * matrix_norm(inv(x), p)
        except (np.linalg.LinAlgError, ValueError) as e:
            if "ord" in str(e) or "order" in str(e):
                raise
            want = _per_batch(lambda v: np.linalg.cond(v, p), x)    # singular somewhere: NumPy's inf, no gradient
            return _wrap(want) if isinstance(x, Tensor) and not x._level else want
    nan = np.isnan(whole_batch(r)) & ~np.isnan(whole_batch(x)).any(axis=(-2, -1))
    if np.any(nan):
        r = where(batched_like(nan, r), np.inf, r)
    return r
