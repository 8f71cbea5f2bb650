"""Spectral linear algebra: the primitives ``eigh``, ``eigvalsh``, ``svd``, ``svdvals`` and ``pinv`` (the
NumPy-named ``pinv`` with its cutoffs and the composites ``lstsq``, ``cond``, ``matrix_rank``, the norms
are in ``numpy/spectral_functions``; the clusters of equal values and the checks that refuse there,
in ``_degenerate``).

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
primitive too, with the Golub-Pereyra (1973) formula, which needs no
singular vectors: it is exact at repeated singular values (orthogonal matrices).

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

from chainrule.core._backend import np
from chainrule.core._registry import apply, defprim, raw
from chainrule.core.batched import batched_like, whole_batch
from chainrule.core.errors import ShapeError
from chainrule.core.grad_mode import STATE
from chainrule.core.tensor import Tensor
from chainrule.ops._batching import batch_unary, set_batch
from chainrule.ops._degenerate import (
    _check_block,
    _check_inside,
    _check_mixed,
    _check_order,
    _check_reverse_blocks,
    _check_zero_columns,
    _each_cluster,
    _eps,
    _first,
    _gap_rtol,
    _gauge_error,
    _max_abs,
    _near,
    _reaching,
    _zero_sv_error,
)
from chainrule.ops.decompositions import _diag
from chainrule.ops.decompositions import _mh as _mH
from chainrule.ops.elementwise import abs, astype, conj, sign, where
from chainrule.ops.linalg import _per_batch, matmul
from chainrule.ops.reduction import sum
from chainrule.ops.shape import concatenate, expand_dims, imag, real, take_along_axis

_NoValue = object()


# ----- small helpers (ndarrays in the fast path, Tensors when the rule is recorded) -----
def _is_complex(x: Any) -> bool:
    return raw(x).dtype.kind == "c"


def _herm(t: Any) -> Any:
    return (t + _mH(t)) * 0.5


def _diag_embed(d: Any) -> Any:
    n = raw(d).shape[-1]
    return expand_dims(d, -1) * np.eye(n, dtype=raw(d).dtype)


def _row(s: Any) -> Any:     # s_j along the columns
    return expand_dims(s, -2)


def _col(s: Any) -> Any:     # s_i along the rows
    return expand_dims(s, -1)


def _nonzero(x: Any) -> bool:
    return x is not None and bool(np.any(whole_batch(x)))


def _as_dtype(x: Any, dtype: Any) -> Any:
    return x if raw(x).dtype == dtype else astype(x, dtype)


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


def _svd_input(a: Any, hermitian: bool, op: str) -> tuple:
    """``(a, its shape)`` for an SVD-based ``op``: floating matrices, square ones if ``hermitian``."""
    a = _floating(a)
    shape = _matrices(a, op)
    if hermitian:
        _square(a, op)
    return a, shape


# ----- eigh -----
def _eigh_forward(a: Any, UPLO: str, inside: bool = False) -> Any:
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return np.concatenate([w[..., None, :].astype(v.dtype), v], axis=-2)


def _split_eigh(out: Any) -> tuple:
    w = out[..., 0, :]
    return (real(w) if _is_complex(w) else w), out[..., 1:, :]


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


def _eigvalsh_parts(x: Any, UPLO: str) -> tuple:
    """``(n, g, w, v, near)`` of ``x = [A; g]``: A's eigenvalues and vectors, and which eigenvalues are
    (nearly) equal."""
    n = np.shape(raw(x))[-1]
    a, g = _unpack(x, n)
    w, v = _eigh_inside(a, UPLO)
    return n, g, w, v, _near(w)[0]


def _eigvalsh_vjp_jvp(t: Any, out: Any, x: Any, UPLO: str) -> Any:
    n, g, w, v, near = _eigvalsh_parts(x, UPLO)
    ta, tg = _unpack(t, n)
    p = matmul(matmul(_mH(v), _herm(ta)), v)
    if near.any():
        _check_order(x, near, p, w, "eigvalsh", "eigenvalues", 2)
        outer = _outer_ps(x, v, rows=n)
        v, p = _adapt(v, near, p, outer)
        if outer:
            _check_mixed(p, near, w, "eigvalsh", "eigenvalues")
    inner = _diag_embed(tg) + _divided(g, w, near, tg, real(_diag(p))) * p
    return matmul(matmul(v, inner), _mH(v))


def _eigvalsh_vjp_vjp(c: Any, out: Any, x: Any, UPLO: str) -> Any:
    _, g, w, v, near = _eigvalsh_parts(x, UPLO)
    xc = _herm(matmul(matmul(_mH(v), c), v))
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


def _off_square(y: Any, x: Any, z: Any, u: Any, v: Any, g_s: Any, m: int, n: int, k: int) -> Any:
    """``y`` plus the terms of the rows (m > k) or columns (n > k) outside the square part, for the
    (co)tangent ``x`` with ``z = U^H x V``; ``g_s`` is g / s (0 at zero singular values)."""
    if m > k:
        y = y + matmul((matmul(x, v) - matmul(u, z)) * _row(g_s), _mH(v))
    if n > k:
        y = y + matmul(u * _row(g_s), matmul(_mH(u), x) - matmul(z, _mH(v)))
    return y


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
    return _off_square(matmul(matmul(u, inner), _mH(v)), ta, p, u, v, g_s, m, n, k)


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
    ga = _off_square(matmul(matmul(u, _divided(g, s, near) * herm_x + d_plus * ((xc - xh) * 0.5)), _mH(v)),
                     c, xc, u, v, g_s, m, n, k)
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
    a, shape = _svd_input(a, hermitian, "svd")
    if hermitian:
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


for _prim in (EIGH, EIGVALSH, EIGVALSH_VJP, SVD, SVDVALS, SVDVALS_VJP):
    set_batch(_prim, batch_unary)


# ----- pinv (its NumPy-named function, with the rcond/rtol cutoffs: numpy/spectral_functions.py) -----
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
