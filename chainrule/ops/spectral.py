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
own (no vectors computed forward; their rules recompute them, and their VJPs are the primitives
``eigvalsh_vjp``/``svdvals_vjp`` of [A; g], so that they are differentiable again). ``pinv`` is a
primitive too, with the Golub-Pereyra (1973) formula, which needs no singular vectors: it is exact
at repeated singular values (orthogonal matrices).

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

Gauge and degeneracy (never a silent inf/NaN):
  * a cotangent that depends on the phase of complex eigen/singular vectors (Im diag(V^H gV) not
    ~0, or Im diag(U^H gU) + Im diag(V^H gV) not ~0 for svd, as PyTorch checks) raises;
  * between (nearly) equal values (relative gap < max(1e-10, 10 eps)) the vectors' 1/gap terms are
    0/0, and their limit is not a function of the cotangent (for losses invariant under rotations
    inside the cluster it is c X_ij, X = V^H gV (XU + XV for svd), with c = 0 for a projector onto
    the cluster, f'/2f for a matrix function V f(w) V^H, anything for sums of those): reverse mode
    computes where X is ~0 between those values (the loss does not use the cluster's vectors there)
    and raises otherwise, naming what works (``_check_block``; terms that cancel exactly in X stay
    invisible to any cotangent);
  * functions of the values alone: the first derivative V diag(g) V^H is exact; the second is the
    derivative of that matrix function (Lewis & Sendov 2001), with the divided differences
    (g_j - g_i)/(w_j - w_i), 0/0 inside a cluster: ``eigvalsh_vjp`` / ``svdvals_vjp`` are primitives
    of [A; g] whose JVP sees dA and dg together and works in the basis adapted to dA (its block
    diagonal there: no divided difference needed, and the value tangents are the one-sided
    directional derivatives), so cr.hvp, cr.hessian, jvp of jvp, and jvp of hvp along the same
    direction are exact at repeated values; reverse-over-reverse, and third order along different
    directions, raise there where the (co)tangent reaches the cluster;
  * in forward mode eigh/svd's vectors have no tangent there: it holds the basis fixed (exact for
    projectors onto whole subspaces) and warns.
``svd(full_matrices=True)`` with m != n: the columns beyond min(m, n) get no gradient (they are not
determined by A); a nonzero cotangent on them raises (PyTorch silently drops it). Their tangent is
the minimal rotation keeping them orthogonal to the thin factor.

FLOPs: eigh 9 n^3, svd and pinv 4 m n k + 8 k^3 (per matrix; LAPACK's usual leading terms).
"""
from __future__ import annotations

import warnings
from typing import Any, NamedTuple

from .._backend import np
from .._dtypes import LOW_PRECISION, accumulate
from ..batched import batched_like, whole_batch
from ..errors import ShapeError, VmapError
from ..grad_mode import STATE
from ..tensor import Tensor
from ..tensor import wrap as _wrap
from ._batching import batch_unary, set_batch
from ._registry import apply, defprim, raw
from .elementwise import _abs2, _zero_at_zero, abs, astype, conj, sign, sqrt, where
from .linalg import _per_batch, inv, matmul
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
    squeeze,
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


# ----- eigh -----
def _eigh_forward(a: Any, UPLO: str, inside: bool = False) -> Any:
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return np.concatenate([w[..., None, :].astype(v.dtype), v], axis=-2)


def _split_eigh(out: Any) -> tuple:
    w = out[..., 0, :]
    return (real(w) if _is_complex(w) else w), out[..., 1:, :]


def _near(w: Any) -> tuple:
    """The pairs i != j of (nearly) equal eigenvalues or singular values (relative gap <= _gap_rtol),
    from ``w``'s values (all examples of a vmap batch), and the spectrum's scale."""
    wd = whole_batch(w)
    n = wd.shape[-1]
    top = np.abs(wd).max(axis=-1, initial=0)[..., None, None]
    gap = np.abs(wd[..., None, :] - wd[..., :, None])
    return (gap <= _gap_rtol(wd.dtype) * top) & ~np.eye(n, dtype=bool), top


def _clusters(near: Any) -> list:
    """The runs of consecutive (nearly) equal values of one sorted spectrum, as slices of >= 2."""
    n, out, i = near.shape[-1], [], 0
    while i < n:
        j = i
        while j + 1 < n and near[j, j + 1]:
            j += 1
        if j > i:
            out.append(slice(i, j + 1))
        i = j + 1
    return out


def _each_cluster(near: Any, shape: tuple) -> Any:
    """(index of one matrix in a batch of ``shape``, its cluster slice) for every degenerate cluster."""
    near = np.broadcast_to(near, shape[:-2] + near.shape[-2:])
    for idx in np.ndindex(*shape[:-2]):
        for sl in _clusters(near[idx]):
            yield idx, sl


def _outer_ps(x: Any, v: Any, u: Any = None, rows: int | None = None) -> list:
    """U^H dA V (V^H herm(dA) V without ``u``) for the tangents dA of ``x`` (its first ``rows`` rows) at
    the visible outer forward levels, outermost first: the directions a rule of an inner level is
    itself differentiated along (jvp of jvp, jvp of hvp)."""
    tans = getattr(x, "_tangents", None)
    if not tans:
        return []
    out = []
    for level in sorted(tans):
        if level <= STATE.fw_visible and level in STATE.fw_levels:
            t = tans[level] if rows is None else tans[level][..., :rows, :]
            out.append(matmul(matmul(_mH(v), _herm(t)), v) if u is None else matmul(matmul(_mH(u), t), v))
    return out


def _adapt(v: Any, near: Any, p: Any, outer: list = (), u: Any = None, descending: bool = False) -> tuple:
    """Rotate the basis inside each degenerate cluster so that the tangent's block herm(P_B) is
    diagonal (the basis that degenerate perturbation theory picks along the tangent): then diag(P')
    holds the one-sided directional derivatives of the values, and no 1/gap term is needed inside a
    cluster. Under nested forward mode the outer directions (``outer``, outermost first) pick the
    basis first and the tangent breaks their ties: the limit basis of the outer derivatives' path.
    Returns (v Q, Q^H P Q) (and u Q); Q is a constant: the functions of the spectrum that use it are
    invariant under rotations inside a cluster."""
    pd = whole_batch(p)
    dirs = [np.broadcast_to(whole_batch(o), pd.shape) for o in outer] + [pd]
    q = np.broadcast_to(np.eye(pd.shape[-1], dtype=pd.dtype), pd.shape).copy()
    for idx, sl in _each_cluster(near, pd.shape):
        qb = np.eye(sl.stop - sl.start, dtype=pd.dtype)
        groups = [np.arange(sl.stop - sl.start)]
        for d in dirs:
            blk = d[idx + (sl, sl)]
            blk = (blk + np.conj(blk.T)) / 2
            tol = np.sqrt(_eps(pd.dtype)) * max(np.abs(d[idx]).max(initial=0), 1e-300)
            split = []
            for grp in groups:
                e, y = np.linalg.eigh(np.conj(qb[:, grp].T) @ blk @ qb[:, grp])
                if descending:
                    e, y = e[::-1], y[:, ::-1]
                qb[:, grp] = qb[:, grp] @ y
                cuts = np.flatnonzero(np.abs(np.diff(e)) > tol) + 1
                split += [grp[c] for c in np.split(np.arange(len(grp)), cuts) if len(c) > 1]
            groups = split
            if not groups:
                break
        q[idx + (sl, sl)] = qb
    q = batched_like(q, p)
    p = matmul(matmul(_mH(q), p), q)
    return (matmul(v, q), p) if u is None else (matmul(v, q), p, matmul(u, q))


def _inverse_gaps(w: Any, near: Any) -> Any:
    """E_ij = 1 / (w_j - w_i) off the diagonal, 0 on it and between (nearly) equal values."""
    ok = ~near & ~np.eye(near.shape[-1], dtype=bool)
    diff = expand_dims(w, -2) - expand_dims(w, -1)
    return where(ok, 1.0 / where(ok, diff, 1.0), 0.0)


def _basis_error(op: str, kind: str, a: float, b: float, basis: bool) -> ValueError:
    eig = kind == "eigenvalues"
    vec, space = ("eigenvectors", "eigenspace") if eig else ("singular vectors", "singular subspace")
    why = (f"the loss depends on which basis of that {space} is returned, so it has no derivative" if basis else
           f"the loss uses their {vec}, where a cotangent does not determine the derivative (" +
           ("sum(V diag(w) V^T) = sum(A) and sum(w) + 2 sum(V V^T) = trace(A) + n" if eig else
            "sum(U diag(S) Vh) = sum(A) and sum(S) + 2 sum(U Vh)") +
           " get the same one at 2I but have different gradients)")
    use = ("cr.linalg.eigvalsh for functions of the eigenvalues (exact; second order with cr.hvp); matrix ops "
           "for V f(w) V^T (A @ A, cr.linalg.matrix_power, cr.linalg.matrix_exp); for a projector onto a whole "
           "eigenspace, I minus the other (simple) eigenvectors' projectors or a polynomial (eigenvalues (1, 1, 3): "
           "I - 3T^2 + 2T^3, T = (A - I)/2)" if eig else
           "cr.linalg.svdvals for functions of the singular values (exact; second order with cr.hvp); matrix ops for "
           "U f(S) Vh (A is U diag(S) Vh, A A^H A is U diag(S^3) Vh); for a projector onto a whole singular subspace, "
           "a polynomial in A^H A (singular values (2, 2, 1), right: 3T^2 - 2T^3, T = (A^H A - I)/3) or, for square "
           "A, I minus the other (simple) vectors' projectors")
    return ValueError(f"{op}: no derivative with respect to the {vec} here: {kind} {a:.8g} and {b:.8g} are (nearly) "
                      f"equal and {why}. Use: {use}; or break the tie (A + eps*B: an O(eps) error)")


def _reaching(z: Any, where_: Any) -> Any:
    """The pairs of ``where_`` at which z_ij or z_ji is not ~0 (relative to z's largest entry)."""
    zd = np.abs(whole_batch(z))
    return where_ & (np.maximum(zd, np.swapaxes(zd, -1, -2)) > np.sqrt(_eps(zd.dtype)) * _max_abs(z))


def _check_block(x: Any, near: Any, wd: Any, op: str, kind: str) -> None:
    """Between (nearly) equal values the inner matrix's entries are 0/0, and the cotangent ``x``
    (V^H gV, or XU + XV for svd) does not determine their limit: for a loss invariant under rotations
    inside the cluster it is c x_ij with c = 0 for a projector onto the cluster, f'/2f for one matrix
    function V f(w) V^H, any c for sums of those (the values' cotangent absorbs a function of w). So
    the rule computes only where x is ~0 there (the loss does not reach those vectors' off-diagonal
    entries, e.g. it does not use them), and raises otherwise (a skew x there: the loss depends on
    the basis). A block that vanishes by an exact cancellation between terms is beyond any cotangent."""
    bad = _reaching(x, near)
    if bad.any():
        *at, i, j = np.argwhere(bad)[0]
        wb = np.broadcast_to(wd, bad.shape[:-1])[tuple(at)]
        xd = np.broadcast_to(whole_batch(x), bad.shape)[tuple(at)]
        basis = abs(xd[i, j] - np.conj(xd[j, i])) > np.sqrt(_eps(xd.dtype)) * np.abs(xd).max()
        raise _basis_error(op, kind, float(wb[i]), float(wb[j]), bool(basis))


def _eigh_vjp(g: Any, out: Any, a: Any, UPLO: str, inside: bool = False) -> Any:
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
        near, _ = _near(w)
        if near.any() and inside:
            _check_inside(x, near, whole_batch(w), "eigvalsh", "eigenvalues")
        elif near.any():
            _check_block(x, near, whole_batch(w), "eigh", "eigenvalues")
        inner = inner + _inverse_gaps(w, near) * ((x - _mH(x)) * 0.5)
    return matmul(matmul(v, inner), vh)


def _eigh_jvp(t: Any, out: Any, a: Any, UPLO: str, inside: bool = False) -> Any:
    w, v = _split_eigh(out)
    th = _herm(t)
    p = matmul(matmul(_mH(v), th), v)
    near, _ = _near(w)
    dv = matmul(v, _inverse_gaps(w, near) * p)
    if near.any():
        pd = np.abs(whole_batch(p))
        if not inside and (near & (pd > np.sqrt(_eps(pd.dtype)) * _max_abs(p))).any():
            warnings.warn("eigh: at (nearly) equal eigenvalues the eigenvectors have no forward-mode tangent; "
                          "the eigenvalues' tangents are their one-sided directional derivatives (exact), the "
                          "eigenvectors' holds the basis of that eigenspace fixed: exact for projectors onto the "
                          "whole eigenspace, wrong for reconstructions V f(w) V^H, other losses that couple those "
                          "eigenvalues with their vectors, and second derivatives (cr.hvp) of eigh's eigenvalues. "
                          "For the eigenvalues use eigvalsh, whose derivatives of every order are exact there",
                          RuntimeWarning, stacklevel=2)
        p = _adapt(v, near, p, _outer_ps(a, v))[1]
    dw = _as_dtype(real(_diag(p)), raw(out).dtype)
    return concatenate([expand_dims(dw, -2), dv], axis=-2)


def _eig_flops(out: Any, a: Any, **params: Any) -> int:
    n = np.shape(a)[-1]
    return 9 * int(np.size(a)) * int(n)


EIGH = defprim("eigh", _eigh_forward, vjps=(_eigh_vjp,), jvps=(_eigh_jvp,), saves="out", flops=_eig_flops,
               kind="matmul", autocast="float32", complex="own",
               hint="eigh expects Hermitian (symmetric) matrices (..., n, n); only the UPLO triangle is read.")


def _eigh_inside(a: Any, UPLO: str) -> tuple:
    """eigh inside the rules of eigvalsh and eigvalsh_vjp, which use the eigenvectors only in
    rotation-invariant forms: the warning of eigh's JVP about the vectors' tangent does not apply."""
    if not isinstance(a, Tensor):
        return np.linalg.eigh(a, UPLO=UPLO)
    return _split_eigh(apply(EIGH, (a,), {"UPLO": UPLO, "inside": True}))


def _eigvalsh_vjp(g: Any, out: Any, a: Any, UPLO: str) -> Any:
    if not isinstance(a, Tensor) and not isinstance(g, Tensor):
        w, v = np.linalg.eigh(a, UPLO=UPLO)
        return matmul(v * _row(g), _mH(v))
    return apply(EIGVALSH_VJP, (_pack(a, g),), {"UPLO": UPLO})


def _pack(a: Any, g: Any) -> Any:
    """[a; g] as one (..., m + 1, n) input (g zero-padded to n), so that a rule sees both tangents."""
    dtype = np.result_type(raw(a).dtype, raw(g).dtype)
    shape = np.broadcast_shapes(np.shape(raw(a))[:-2], np.shape(raw(g))[:-1])
    a = _as_dtype(a, dtype) + np.zeros(shape + np.shape(raw(a))[-2:], dtype)
    g = _as_dtype(g, dtype) + np.zeros(shape + np.shape(raw(g))[-1:], dtype)
    n, k = np.shape(raw(a))[-1], np.shape(raw(g))[-1]
    if k < n:
        g = concatenate([g, np.zeros(shape + (n - k,), dtype)], axis=-1)
    return concatenate([a, expand_dims(g, -2)], axis=-2)


def _unpack(x: Any, k: int) -> tuple:
    g = x[..., -1, :k]
    return x[..., :-1, :], (real(g) if _is_complex(g) else g)


def _eigvalsh_jvp(t: Any, out: Any, a: Any, UPLO: str) -> Any:
    w, v = _eigh_inside(a, UPLO)
    th = _herm(t)
    near, _ = _near(out)
    if near.any():         # the one-sided derivatives of repeated eigenvalues: eig(P_B), in the adapted basis
        p = matmul(matmul(_mH(v), th), v)
        _check_order(a, near, p, out, "eigvalsh", "eigenvalues", 1)
        v = _adapt(v, near, p, _outer_ps(a, v))[0]
    return real(sum(conj(v) * matmul(th, v), axis=-2))


EIGVALSH = defprim("eigvalsh", lambda a, UPLO: np.linalg.eigvalsh(a, UPLO=UPLO), vjps=(_eigvalsh_vjp,),
                   jvps=(_eigvalsh_jvp,), saves="x", flops=_eig_flops, kind="matmul", autocast="float32",
                   complex="own", hint="eigvalsh expects Hermitian (symmetric) matrices (..., n, n).")


# ----- the gradient of a function of the eigenvalues, V diag(g) V^H, as a primitive of [A; g] -----
# Its derivative needs the divided differences (g_j - g_i) / (w_j - w_i) (Lewis & Sendov 2001),
# 0/0 between equal eigenvalues. In forward mode the rule sees both tangents: in the basis adapted
# to the tangent (_adapt), dA's block is diagonal and no divided difference is needed inside a
# cluster; there it is (dg_j - dg_i) / (dw_j - dw_i), read off the tangents, for the next order.
# Reverse mode sees only a cotangent: it raises when that cotangent reaches the 0/0 entries.
def _eigvalsh_vjp_forward(x: Any, UPLO: str) -> Any:
    n = x.shape[-1]
    a, g = x[..., :n, :], x[..., n, :]
    v = np.linalg.eigh(a, UPLO=UPLO)[1]
    return (v * g[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))


def _divided(g: Any, w: Any, near: Any, dg: Any = None, dw: Any = None) -> Any:
    """(g_j - g_i) / (w_j - w_i) off the diagonal and between distinct values; between (nearly) equal
    ones the same ratio of the tangents dg, dw where those differ, else 0."""
    n = near.shape[-1]
    ok = ~near & ~np.eye(n, dtype=bool)
    dd = where(ok, (_row(g) - _col(g)) / where(ok, _row(w) - _col(w), 1.0), 0.0)
    if dg is None or not near.any():
        return dd
    dwd = whole_batch(dw)
    inside = batched_like(near & (np.abs(dwd[..., None, :] - dwd[..., :, None]) > np.sqrt(_eps(dwd.dtype)) *
                                  np.abs(dwd).max(axis=-1, initial=0)[..., None, None]), dw)
    return dd + where(inside, (_row(dg) - _col(dg)) / where(inside, _row(dw) - _col(dw), 1.0), 0.0)


def _eigvalsh_vjp_jvp(t: Any, out: Any, x: Any, UPLO: str) -> Any:
    n = np.shape(raw(x))[-1]
    a, g = _unpack(x, n)
    ta, tg = _unpack(t, n)
    w, v = _eigh_inside(a, UPLO)
    p = matmul(matmul(_mH(v), _herm(ta)), v)
    near, _ = _near(w)
    if near.any():
        _check_order(x, near, p, w, "eigvalsh", "eigenvalues", 2)
        outer = _outer_ps(x, v, rows=n)
        v, p = _adapt(v, near, p, outer)
        if outer:
            _check_mixed(p, near, w, "eigvalsh", "eigenvalues")
    inner = _diag_embed(tg) + _divided(g, w, near, tg, real(_diag(p))) * p
    return matmul(matmul(v, inner), _mH(v))


def _check_inside(x: Any, near: Any, wd: Any, op: str, kind: str) -> None:
    """Reverse mode through eigvalsh's/svdvals' own derivative rules (a gradient of a jvp, a third
    derivative): inside a cluster those rules use the basis their tangent picks, which a reverse pass
    cannot follow. Raise where its cotangent reaches a cluster."""
    bad = _reaching(x, near)
    if bad.any():
        idx = _first(bad, near.shape)
        raise ValueError(
            f"{op}: a reverse-mode derivative of its derivative (cr.grad of a cr.jvp, or a third derivative) at "
            f"repeated {kind} ({float(np.broadcast_to(wd, near.shape[:-1])[idx[:-1]]):.8g}) is not supported: "
            f"inside the repeated block the rules use the basis that the tangent picks, which reverse mode cannot "
            f"follow. Second derivatives are exact with cr.hvp, cr.jvp(cr.grad(f)) and cr.hessian; or split the "
            f"{kind} (perturb the matrix)")


def _check_order(x: Any, near: Any, p: Any, w: Any, op: str, kind: str, order: int) -> None:
    """A rule whose tangent is a derivative of ``order``, differentiated by more than one outer forward
    level: its adapted basis is exact for one more order only (the next needs the basis' derivative)."""
    tans = getattr(x, "_tangents", None)
    if tans and len([lv for lv in tans if lv <= STATE.fw_visible and lv in STATE.fw_levels]) > 1:
        pd = np.abs(whole_batch(p))
        cluster = near | np.eye(near.shape[-1], dtype=bool)
        if (cluster & np.broadcast_to(near.any(axis=-1, keepdims=True), near.shape)
                & (pd > np.sqrt(_eps(pd.dtype)) * _max_abs(p))).any():
            raise ValueError(f"{op}: derivatives of order {order + 2} and higher at repeated {kind} by nested "
                             f"forward mode are not supported (they need the derivative of the basis inside the "
                             f"repeated block); second derivatives are exact (cr.hvp, cr.hessian, jvp of jvp), and "
                             f"third ones along one direction (cr.jvp of cr.hvp); or split the {kind} (perturb "
                             f"the matrix)")


def _check_mixed(p: Any, near: Any, w: Any, op: str, kind: str) -> None:
    """A third derivative along different directions needs the derivative of the divided differences
    inside a cluster, which is not computed: raise where the tangent, in the basis its outer
    directions pick, still reaches the cluster's off-diagonal entries."""
    pd = np.abs(whole_batch(p))
    bad = near & (pd > np.sqrt(_eps(pd.dtype)) * _max_abs(p))
    if bad.any():
        idx = _first(bad, near.shape)
        raise ValueError(
            f"{op}: third (and higher) derivatives of a function of the {kind} along different directions at "
            f"repeated {kind} ({float(np.broadcast_to(whole_batch(w), near.shape[:-1])[idx[:-1]]):.8g}) are not "
            f"supported: they need the derivative of the gradient's divided differences inside the repeated block. "
            f"Along one direction (cr.jvp of cr.hvp with the same tangent), and to second order in any directions "
            f"(cr.hvp, cr.hessian), they are exact; or split the {kind} (perturb the matrix)")


def _second_order_error(op: str, kind: str, a: float) -> ValueError:
    fn, x = ("eigvalsh", "w") if kind == "eigenvalues" else ("svdvals", "s")
    return ValueError(
        f"{op}: reverse-over-reverse second derivative at repeated {kind} ({a:.8g}): it needs the divided "
        f"differences (g_j - g_i) / ({x}_j - {x}_i) of the gradient inside the repeated block, a 0/0 "
        f"limit that a reverse-mode cotangent does not determine. Forward-over-reverse sees the tangents and "
        f"is exact there: use cr.hvp(f, (x,), (v,)), cr.jvp(cr.grad(f), (x,), (v,)) or cr.hessian / "
        f"cr.jacfwd(cr.grad(f)) for functions of {fn}")


def _check_reverse_blocks(x: Any, near: Any, wd: Any, op: str, kind: str) -> None:
    xd = np.abs(whole_batch(x))
    bad = near & (xd > np.sqrt(_eps(xd.dtype)) * _max_abs(x))
    if bad.any():
        idx = _first(bad, near.shape)
        raise _second_order_error(op, kind, float(np.broadcast_to(wd, near.shape[:-1])[idx[:-1]]))


def _eigvalsh_vjp_vjp(c: Any, out: Any, x: Any, UPLO: str) -> Any:
    n = np.shape(raw(x))[-1]
    a, g = _unpack(x, n)
    w, v = _eigh_inside(a, UPLO)
    xc = _herm(matmul(matmul(_mH(v), c), v))
    near, _ = _near(w)
    if near.any():
        _check_reverse_blocks(xc, near, whole_batch(w), "eigvalsh", "eigenvalues")
    ga = matmul(matmul(v, _divided(g, w, near) * xc), _mH(v))
    return concatenate([ga, expand_dims(_as_dtype(real(_diag(xc)), raw(ga).dtype), -2)], axis=-2)


EIGVALSH_VJP = defprim("eigvalsh_vjp", _eigvalsh_vjp_forward, vjps=(_eigvalsh_vjp_vjp,), jvps=(_eigvalsh_vjp_jvp,),
                       saves="x", flops=lambda out, x, **p: _eig_flops(out, x[..., 1:, :]), kind="matmul",
                       autocast="float32", complex="own",
                       hint="eigvalsh_vjp expects [A; g]: Hermitian matrices (..., n, n) with a row of n values.")


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
def _svd_forward(a: Any, full_matrices: bool, m: int, inside: bool = False) -> Any:
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
    ones. There, in reverse mode, ``joint`` (XU + XV) and ``anti`` (XU - XV) must vanish on the pair
    (_check_block); in forward mode (``joint``, ``anti`` = the tangent's P + P^H, P - P^H)
    a tangent there warns that the vectors' tangent holds the basis fixed."""
    sd = whole_batch(s)
    k = sd.shape[-1]
    rtol = _gap_rtol(sd.dtype)
    top = sd.max(axis=-1, initial=0)[..., None, None]
    off = ~np.eye(k, dtype=bool)
    zero = sd <= rtol * top[..., 0]
    near = (np.abs(sd[..., None, :] - sd[..., :, None]) <= rtol * top) & off
    both_zero = near & zero[..., :, None] & zero[..., None, :]
    if near.any() and not forward:
        for z, where_ in ((joint, near), (anti, both_zero)):
            if z is not None:
                _check_block(z, where_, sd, op, "singular values")
    elif near.any():
        bad = np.zeros_like(near)
        for z, where_ in ((joint, near), (anti, both_zero)):
            if z is not None:
                bad |= _reaching(z, where_)
        if bad.any():
            idx = _first(bad, near.shape)
            si, sj = float(sd[idx[:-1]]), float(sd[idx[:-2] + (idx[-1],)])
            warnings.warn(f"{op}: at (nearly) equal singular values ({si:.8g} and {sj:.8g}) the singular vectors "
                          f"have no forward-mode tangent; the singular values' tangents are their one-sided "
                          f"directional derivatives (exact), the vectors' holds the basis of that subspace fixed: "
                          f"exact for projectors onto the whole subspace, wrong for reconstructions U f(S) Vh, other "
                          f"losses that couple those values with their vectors, and second derivatives (cr.hvp) of "
                          f"svd's S. For the singular values use svdvals, whose derivatives of every order are "
                          f"exact there", RuntimeWarning, stacklevel=3)
    ok_m = off & ~near
    ok_p = off & ~both_zero
    f_m = where(ok_m, 1.0 / where(ok_m, _row(s) - _col(s), 1.0), 0.0)
    f_p = where(ok_p, 1.0 / where(ok_p, _row(s) + _col(s), 1.0), 0.0)
    s_inv = where(zero, 0.0, 1.0 / where(zero, 1.0, s))
    return f_m, f_p, s_inv, zero, near


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
    f_m, f_p, s_inv, zero, near = _svd_checks(s, op, joint, anti)
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


def _svd_vjp(g: Any, out: Any, a: Any, full_matrices: bool, m: int, inside: bool = False) -> Any:
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
    if inside and (_nonzero(gu) or _nonzero(gv)):
        near, _ = _near(s)
        if near.any():
            xs = [matmul(_mH(f), gf) for f, gf in ((u, gu), (v, gv)) if _nonzero(gf)]
            _check_inside(xs[0] if len(xs) == 1 else xs[0] + xs[1], near, whole_batch(s), "svdvals",
                          "singular values")
    return _svd_core_vjp(gu, gs, gv, u, s, v, "svd")


def _pad_cols(x: Any, p: int) -> Any:
    w = raw(x).shape[-1]
    if w == p:
        return x
    return concatenate([x, np.zeros(raw(x).shape[:-1] + (p - w,), dtype=raw(x).dtype)], axis=-1)


def _svd_jvp(t: Any, out: Any, a: Any, full_matrices: bool, m: int, inside: bool = False) -> Any:
    n, k, ku, kv = _svd_sizes(out, full_matrices, m)
    p = raw(out).shape[-1]
    dtype = raw(out).dtype
    u, s, v = out[..., :m, :k], real(out[..., m, :k]), out[..., m + 1:, :k]
    dp = matmul(matmul(_mH(u), t), v)
    dph = _mH(dp)
    sym_p, skew_p = dp + dph, dp - dph
    f_m, f_p, s_inv, zero, near = _svd_checks(s, "svd", None if inside else sym_p, None if inside else skew_p,
                                              forward=True)
    ds = real(_diag(_adapt(v, near & ~zero[..., None], dp, _outer_ps(a, v, u), u, descending=True)[1]
                    if near.any() else dp))
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


def _svd_inside(a: Any) -> tuple:
    """Thin (U, S, Vh) inside the rules of svdvals and svdvals_vjp (see _eigh_inside)."""
    if not isinstance(a, Tensor):
        return np.linalg.svd(a, full_matrices=False)
    m = np.shape(raw(a))[-2]
    u, s, v = _split_svd(apply(SVD, (a,), {"full_matrices": False, "m": m, "inside": True}), False, m)
    return u, s, _mH(v)


def _svdvals_vjp(g: Any, out: Any, a: Any) -> Any:
    if not isinstance(a, Tensor) and not isinstance(g, Tensor):
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        return matmul(u * _row(g), vh)
    return apply(SVDVALS_VJP, (_pack(a, g),))


def _svdvals_jvp(t: Any, out: Any, a: Any) -> Any:
    u, s, vh = _svd_inside(a)
    v = _mH(vh)
    near, _ = _near(out)
    zero = whole_batch(out) <= _gap_rtol(whole_batch(out).dtype) * whole_batch(out).max(axis=-1, initial=0)[..., None]
    near = near & ~zero[..., None]
    if near.any():         # the one-sided derivatives of repeated singular values, in the adapted basis
        p = matmul(matmul(_mH(u), t), v)
        _check_order(a, near, p, out, "svdvals", "singular values", 1)
        v, _, u = _adapt(v, near, p, _outer_ps(a, v, u), u, descending=True)
    return real(sum(conj(u) * matmul(t, v), axis=-2))


SVDVALS = defprim("svdvals", lambda a: np.linalg.svd(a, compute_uv=False), vjps=(_svdvals_vjp,),
                  jvps=(_svdvals_jvp,), saves="x", flops=_svd_flops, kind="matmul", autocast="float32",
                  complex="own", hint="svdvals expects matrices (..., m, n).")


# ----- the gradient of a function of the singular values, U diag(g) V^H, as a primitive of [A; g] -----
# As eigvalsh_vjp: dG = U (diag(dg) + D- o herm(P) + D+ o skew(P)) V^H + (I - U U^H) dA V diag(g / s) V^H
# + U diag(g / s) U^H dA (I - V V^H), P = U^H dA V, with the divided differences D-_ij = (g_j - g_i) /
# (s_j - s_i) and D+_ij = (g_j + g_i) / (s_j + s_i) (D+_ii = g_i / s_i: the phases of complex pairs).
def _svdvals_vjp_forward(x: Any) -> Any:
    a, k = x[..., :-1, :], min(x.shape[-2] - 1, x.shape[-1])
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    return (u * np.real(x[..., -1:, :k])) @ vh


def _svdvals_parts(x: Any) -> tuple:
    m, n = np.shape(raw(x))[-2] - 1, np.shape(raw(x))[-1]
    k = min(m, n)
    a, g = _unpack(x, k)
    u, s, vh = _svd_inside(a)
    sd = whole_batch(s)
    zero = sd <= _gap_rtol(sd.dtype) * sd.max(axis=-1, initial=0)[..., None]
    near, _ = _near(s)
    ok_p = ~(zero[..., :, None] & zero[..., None, :])
    d_plus = where(ok_p, (_row(g) + _col(g)) / where(ok_p, _row(s) + _col(s), 1.0), 0.0)
    g_s = where(zero, 0.0, g / where(zero, 1.0, s))
    return m, n, k, a, g, u, s, _mH(vh), near, zero, d_plus, g_s


def _zero_sv_second_order(zero: Any, z: Any, ta: Any, m: int, n: int, k: int, u: Any, v: Any, c: Any = None) -> None:
    """At zero singular values the second derivative's g_i / s_i and (g_i + g_j) / (s_i + s_j) are 0/0
    limits that neither mode can read off the gradient; raise where the tangent ``ta`` (or, with ``c``,
    the cotangent) reaches them. ``z`` is U^H ta V (resp. U^H c V)."""
    zd = np.broadcast_to(zero, np.shape(whole_batch(z))[:-1])
    pairs = zd[..., :, None] & zd[..., None, :] & ~np.eye(k, dtype=bool)
    used = [np.where(pairs, whole_batch(z), 0)]
    if _is_complex(z):
        used.append(np.imag(np.diagonal(whole_batch(z), 0, -2, -1)) * zd)
    x = ta if c is None else c
    if m > k:
        used.append(whole_batch(matmul(x, v) - matmul(u, z)) * zd[..., None, :])
    if n > k:
        used.append(whole_batch(matmul(_mH(x), u) - matmul(v, _mH(z))) * zd[..., None, :])
    if max(np.abs(r).max(initial=0) for r in used) > np.sqrt(_eps(raw(z).dtype)) * max(
            np.abs(whole_batch(x)).max(initial=0), 1e-300):
        raise ValueError("svdvals: the second derivative of a function of the singular values at a matrix "
                         "with (nearly) zero singular values needs the limits g_i / s_i as s_i -> 0, which "
                         "the gradient does not determine (e.g. 2 for ||A||_F^2, inf for ||A||_*); "
                         "regularise the matrix or use a formula without singular values "
                         "(||A||_F^2 = (A * A).sum())")


def _svdvals_vjp_jvp(t: Any, out: Any, x: Any) -> Any:
    m, n, k, a, g, u, s, v, near, zero, d_plus, g_s = _svdvals_parts(x)
    ta, tg = _unpack(t, k)
    p = matmul(matmul(_mH(u), ta), v)
    if zero.any():
        _zero_sv_second_order(zero, p, ta, m, n, k, u, v)
    near = near & ~zero[..., None]
    if near.any():
        _check_order(x, near, p, s, "svdvals", "singular values", 2)
        outer = _outer_ps(x, v, u, rows=m)
        v, p, u = _adapt(v, near, p, outer, u, descending=True)
        if outer:
            _check_mixed((p + _mH(p)) * 0.5, near, s, "svdvals", "singular values")
    ph = _mH(p)
    inner = (_diag_embed(tg) + _divided(g, s, near, tg, real(_diag(p))) * ((p + ph) * 0.5)
             + d_plus * ((p - ph) * 0.5))
    dg = matmul(matmul(u, inner), _mH(v))
    if m > k:
        dg = dg + matmul((matmul(ta, v) - matmul(u, p)) * _row(g_s), _mH(v))
    if n > k:
        dg = dg + matmul(u * _row(g_s), matmul(_mH(u), ta) - matmul(p, _mH(v)))
    return dg


def _svdvals_vjp_vjp(c: Any, out: Any, x: Any) -> Any:
    m, n, k, a, g, u, s, v, near, zero, d_plus, g_s = _svdvals_parts(x)
    xc = matmul(matmul(_mH(u), c), v)
    xh = _mH(xc)
    herm_x = (xc + xh) * 0.5
    if near.any():
        _check_reverse_blocks(herm_x, near & ~(zero[..., :, None] & zero[..., None, :]), whole_batch(s), "svdvals",
                              "singular values")
    if zero.any():
        _zero_sv_second_order(zero, xc, None, m, n, k, u, v, c)
    ga = matmul(matmul(u, _divided(g, s, near) * herm_x + d_plus * ((xc - xh) * 0.5)), _mH(v))
    if m > k:
        ga = ga + matmul((matmul(c, v) - matmul(u, xc)) * _row(g_s), _mH(v))
    if n > k:
        ga = ga + matmul(u * _row(g_s), matmul(_mH(u), c) - matmul(xc, _mH(v)))
    gg = _as_dtype(real(_diag(xc)), raw(ga).dtype)
    if k < n:
        gg = concatenate([gg, np.zeros(np.shape(raw(gg))[:-1] + (n - k,), raw(ga).dtype)], axis=-1)
    return concatenate([ga, expand_dims(gg, -2)], axis=-2)


SVDVALS_VJP = defprim("svdvals_vjp", _svdvals_vjp_forward, vjps=(_svdvals_vjp_vjp,), jvps=(_svdvals_vjp_jvp,),
                      saves="x", flops=lambda out, x, **p: _svd_flops(out, x[..., :-1, :]), kind="matmul",
                      autocast="float32", complex="own",
                      hint="svdvals_vjp expects [A; g]: matrices (..., m, n) with a row of min(m, n) values.")


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
for _prim in (EIGH, EIGVALSH, EIGVALSH_VJP, SVD, SVDVALS, SVDVALS_VJP):
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


def _vector_norm(x: Any, ord: Any, axis: Any, keepdims: bool) -> Any:
    """Vector p-norm over ``axis`` (an int, a tuple read as one flattened axis, or None: all).

    Where a p-norm (p > 0) or one of its terms |x_i|**p has an infinite slope at 0 (the whole
    vector 0; a zero entry for p < 1), the gradient there is taken as 0, as PyTorch does."""
    if getattr(x, "dtype", None) in LOW_PRECISION:
        return accumulate(_vector_norm, x, ord, axis, keepdims)
    if ord is None or (not isinstance(ord, str) and ord == 2):
        return _zero_at_zero(sqrt, sum(_abs2(x), axis=axis, keepdims=keepdims))
    if isinstance(ord, str) or not isinstance(ord, (int, float, np.number)):
        raise ValueError(f"norm: ord={ord!r} is not a vector norm order; use a number, inf or -inf "
                         f"(or a 2-D input or a 2-tuple axis for matrix norms such as 'fro' and 'nuc')")
    if ord == np.inf:
        return amax(abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return amin(abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return sum(astype(x != 0, abs(x).dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return sum(abs(x), axis=axis, keepdims=keepdims)
    if ord < 0:                      # a zero entry makes the norm 0 through 0**ord = inf: no masking
        return sum(abs(x) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    # |x|**p (p < 1) and s**(1/p) (p > 1) have infinite slopes at 0: gradient 0 there, as PyTorch
    powered = _zero_at_zero(lambda a: a ** ord, abs(x))
    return _zero_at_zero(lambda s: s ** (1.0 / ord), sum(powered, axis=axis, keepdims=keepdims))


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)


def _matrix_axes(x: Any, axis: Any, op: str) -> tuple:
    ndim = len(np.shape(raw(x)))
    if not isinstance(axis, (tuple, list)) or len(axis) != 2:
        raise ValueError(f"{op}: axis must be a pair of axes, got {axis!r}")
    a0, a1 = (int(a) % ndim if -ndim <= int(a) < ndim else None for a in axis)
    if a0 is None or a1 is None or a0 == a1:
        raise ValueError(f"{op}: invalid axis {axis!r} for an array of {ndim} dimensions")
    return a0, a1


def matrix_norm(x: Any, *, ord: Any = "fro", axis: tuple = (-2, -1), keepdims: bool = False) -> Any:
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
    if ord == "fro":
        return _vector_norm(x, None, (a0, a1), keepdims)
    if ord in (1, -1, np.inf, -np.inf):
        if getattr(x, "dtype", None) in LOW_PRECISION:
            return accumulate(matrix_norm, x, ord, (a0, a1), keepdims)
        inner, outer = (a0, a1) if ord in (1, -1) else (a1, a0)    # 1: max column sum; inf: max row sum
        r = (amax if ord > 0 else amin)(sum(abs(x), axis=inner, keepdims=True), axis=outer, keepdims=True)
        return r if keepdims else squeeze(r, (a0, a1))
    s = svdvals(moveaxis(x, (a0, a1), (-2, -1)))
    r = sum(s, axis=-1) if ord == "nuc" else amax(s, axis=-1) if ord == 2 else amin(s, axis=-1)
    if keepdims:
        shape = list(np.shape(raw(x)))
        shape[a0] = shape[a1] = 1
        r = reshape(r, tuple(shape))
    return r


def vector_norm(x: Any, *, ord: Any = 2, axis: Any = None, keepdims: bool = False) -> Any:
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
        return _vector_norm(x, ord, axes[0], keepdims)
    keep = [a for a in range(ndim) if a not in axes]
    flat = reshape(moveaxis(x, axes, tuple(range(ndim - len(axes), ndim))) if ndim else ravel(x),
                   tuple(shape[a] for a in keep) + (-1,))
    r = _vector_norm(flat, ord, -1, False)
    if keepdims:
        r = reshape(r, tuple(1 if a in axes else shape[a] for a in range(ndim)))
    return r


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``numpy.linalg.norm`` (also ``cr.norm`` and ``Tensor.norm``): a vector norm over one axis (every
    ``ord`` of ``numpy.linalg.norm``: inf, -inf, 0, any p), a matrix norm over two ('fro', 'nuc', 2,
    -2, 1, -1, inf, -inf; 'nuc', 2 and -2 by singular values), the 2-norm of all entries when both
    ``ord`` and ``axis`` are None. Without ``axis``, a 1-D input takes vector norms, a 2-D input
    matrix norms. At 0, a p-norm's gradient is taken as 0, as PyTorch does.

    >>> import chainrule as cr
    >>> cr.linalg.norm(cr.tensor([[1.0, 0.0], [0.0, 2.0]]), ord=2)
    tensor(2.)
    >>> x = cr.tensor([0.0, 0.0], requires_grad=True)
    >>> cr.linalg.norm(x, ord=3).backward(); x.grad
    tensor([0., 0.])
    """
    x = _floating(x)
    ndim = len(np.shape(raw(x)))
    if axis is None:
        if ord is None:
            return _vector_norm(x if keepdims else ravel(x), None, None, keepdims)
        if ndim not in (1, 2):
            raise ValueError(f"norm: ord={ord!r} without axis needs a 1-D or 2-D input, got {ndim} dimensions "
                             f"(shape {np.shape(raw(x))}); pass axis (an int for vector norms, a pair for "
                             f"matrix norms)")
        axis = tuple(range(ndim))
    elif not isinstance(axis, (tuple, list)):
        axis = (axis,)
    if len(axis) == 2:
        return matrix_norm(x, ord="fro" if ord is None else ord, axis=tuple(axis), keepdims=keepdims)
    if len(axis) != 1:
        raise ValueError(f"norm: axis must be an int or a pair of ints, got {axis!r}")
    a = int(axis[0])
    if not -ndim <= a < ndim:
        raise ValueError(f"norm: axis {a} is out of range for an array of {ndim} dimensions")
    return _vector_norm(x, ord, a % ndim, keepdims)


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
            r = matrix_norm(x, ord=p) * matrix_norm(inv(x), ord=p)
        except (np.linalg.LinAlgError, ValueError) as e:
            if "ord" in str(e) or "order" in str(e):
                raise
            want = _per_batch(lambda v: np.linalg.cond(v, p), x)    # singular somewhere: NumPy's inf, no gradient
            return _wrap(want) if isinstance(x, Tensor) and not x._level else want
    nan = np.isnan(whole_batch(r)) & ~np.isnan(whole_batch(x)).any(axis=(-2, -1))
    if np.any(nan):
        r = where(batched_like(nan, r), np.inf, r)
    return r
