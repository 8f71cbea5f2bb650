"""Matrix decompositions and functions: eig, eigvals, qr, matrix_exp, solve_triangular, cho_solve
(slogdet and cholesky are linalg's). NumPy's/SciPy's names, arguments and result types; PyTorch's
derivatives (``torch.linalg``), in both modes, to any order, for real and complex input.

Design. A primitive has one output, so a decomposition with several results is ONE primitive whose
output packs them, and the public function splits it with two getitem views (cheap, and
differentiable like any view): ``eig`` packs the eigenvalues as row 0 above the eigenvectors,
(..., n + 1, n); ``qr`` packs [Q | R], R padded with zero rows to Q's height, (..., m, k + n). A
cotangent of one result reaches the rule with zeros in the other's place. ``eigvals`` is its own
primitive (its forward-mode derivative needs no eigenvector derivative, so it exists at repeated
eigenvalues); its rules call the eig primitive, so they are differentiable too. All rules are
written with chainrule ops (recorded on Tensors: second and higher derivatives come for free);
``matrix_exp``'s rules call ``matrix_exp`` itself on the block matrix [[A, E], [0, A]], whose
upper-right block is the Frechet derivative L(A, E).

Complex convention (PyTorch's): a VJP is J^H g. eig, qr and solve_triangular state their rules
with conjugate transposes themselves (``complex="own"``); matrix_exp is analytic (``"holomorphic"``).
eig always returns complex arrays (as torch.linalg.eig); a real input receives the real part of
its complex cotangent.

Ill-defined derivatives raise a clear error instead of returning inf/NaN: a loss that depends on
the phase of eig's eigenvectors (they are defined up to e^{i phi}); eigenvector derivatives at
repeated eigenvalues, and so eigvals' second derivative there (its rules call eig with
``via="eigvals"``, which says so and suggests what works); qr at a rank-deficient input, or in
mode 'complete' with m > n.

FLOPs: the usual O(n^3) constants (eig 25n^3, qr 4mnk, expm ~20n^3, triangular solves n^2 k).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import scipy.linalg

from chainrule.core._backend import np
from chainrule.core._registry import apply, defprim, raw
from chainrule.core.batched import whole_batch
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.core.tensor import wrap as _wrap
from chainrule.ops._batching import batch_unary, set_batch
from chainrule.ops.elementwise import conj, where
from chainrule.ops.linalg import _batch_solve_like, _per_batch, matmul, solve
from chainrule.ops.reduction import sum
from chainrule.ops.shape import concatenate, diagonal, expand_dims, real, swapaxes, tril, triu

__all__ = ["EigResult", "QRResult", "eig", "eigvals", "qr", "matrix_exp", "solve_triangular",
           "cho_solve"]

_GAP = 1e-10          # relative eigenvalue gap below which eigenvalues count as repeated


# ----- helpers (ndarrays in the fast path, Tensors when the rule is recorded) -----
def _is_complex(x: Any) -> bool:
    return np.dtype(getattr(x, "dtype", np.float64)).kind == "c"


def _t(x: Any) -> Any:
    return swapaxes(x, -1, -2)


def _mh(x: Any) -> Any:
    """Conjugate transpose (the transpose for real data)."""
    return conj(_t(x)) if _is_complex(x) else _t(x)


def _diag(x: Any) -> Any:
    return diagonal(x, 0, -2, -1)


def _eye(n: int) -> Any:
    return np.eye(n, dtype=bool)


def _diag_embed(v: Any) -> Any:
    n = np.shape(raw(v))[-1]
    return expand_dims(v, -2) * np.eye(n, dtype=np.result_type(raw(v).dtype, np.float32))


def _shape(x: Any) -> tuple:
    return np.shape(raw(x))


def _flops_cubic(c: float) -> Any:
    return lambda out, x, *rest, **p: int(c * np.size(raw(x)) * _shape(x)[-1])


# ----- eig, eigvals -----
class EigResult(NamedTuple):
    """``(eigenvalues, eigenvectors)``, with NumPy's field names."""
    eigenvalues: Any
    eigenvectors: Any


def _complex_of(dtype: Any) -> Any:
    return np.result_type(dtype, np.complex64)


def _eig_forward(a: Any, via: str = "eig") -> Any:
    w, v = np.linalg.eig(a)
    dtype = _complex_of(w.dtype)
    return np.concatenate([w[..., None, :].astype(dtype), v.astype(dtype)], axis=-2)


def _split_eig(out: Any) -> tuple:
    return out[..., 0, :], out[..., 1:, :]


def _close_pairs(w: Any) -> Any:
    """(..., n, n): the pairs i != j of eigenvalues closer than _GAP relative to the spectrum's scale."""
    w = whole_batch(w)
    gap = np.where(np.eye(w.shape[-1], dtype=bool), np.inf, np.abs(w[..., None, :] - w[..., :, None]))
    scale = np.maximum(np.abs(w).max(axis=-1, initial=0), np.finfo(np.float64).tiny)
    return gap <= _GAP * scale[..., None, None]


def _repeated(w: Any) -> Any:
    """Per batch element: some eigenvalue is repeated (see _close_pairs)."""
    return _close_pairs(w).any(axis=(-2, -1))


def _repeated_error(via: str, why: str) -> ValueError:
    """At repeated eigenvalues: eig's vectors have no derivative; eigvals' second derivative needs it."""
    if via == "eig":
        return ValueError(f"eig: the derivative of the eigenvectors does not exist at repeated eigenvalues "
                          f"(relative gap < 1e-10) and {why}; differentiate a function of the eigenvalues "
                          f"(eigvals: exact there at first order, in both modes), or perturb the matrix")
    return ValueError("eigvals: the second derivative of the eigenvalues at repeated eigenvalues (relative gap "
                      "< 1e-10) needs the eigenvectors' derivative, which does not exist there (a general matrix "
                      "can turn defective nearby, where its eigenvalues are not differentiable; their symmetric "
                      "functions still are). Use trace identities (sum(eigvals(A)**k) = trace(matrix_power(A, k))), "
                      "eigvalsh for Hermitian matrices (every order is exact there with cr.hvp), or perturb the "
                      "matrix")


def _eig_vjp(g: Any, out: Any, a: Any, via: str = "eig") -> Any:
    # PyTorch's linalg_eig_backward: gA = V^{-H} (diag(gL) + (V^H gV - V^H V Re diag(V^H gV)) / E*) V^H
    w, v = _split_eig(out)
    gw, gv = _split_eig(g)
    vh = _mh(v)
    vhgv = matmul(vh, gv)
    d = _diag(vhgv)
    rd, rgv = whole_batch(d), whole_batch(gv)
    scale = np.abs(whole_batch(vhgv)).max(initial=0)
    if (np.abs(rd.imag) > 1e-6 * scale + 1e-12).any():
        raise ValueError("eig: the eigenvectors are defined only up to a phase, v -> v e^{i phi}, and the "
                         "loss depends on that phase, so its gradient is ill-defined (as in PyTorch). Use a "
                         "loss that is invariant to it: |v|, v v^H, the eigenvalues, or v normalised by a "
                         "fixed component's phase")
    if via == "eigvals" and _repeated(w).any():
        # eigvals' gradient V^-H diag(g) V^H, differentiated again: between repeated eigenvalues the
        # divided differences of g are 0/0, and gV there is 0 whatever their limit: refuse
        raise _repeated_error(via, "")
    if rgv.any() and (_repeated(w) & (np.abs(rgv).max(axis=(-2, -1)) > 0)).any():
        raise _repeated_error(via, "the loss depends on the eigenvectors")
    n = _shape(w)[-1]
    ret = vhgv - matmul(vh, v * expand_dims(real(d), -2))
    wc = conj(w)
    # on the diagonal, and between repeated eigenvalues (reached only with gV = 0 there: ret = 0), no division
    skip = _eye(n) | _close_pairs(w)
    e = where(skip, 1.0, expand_dims(wc, -2) - expand_dims(wc, -1))
    ret = where(_eye(n), _diag_embed(gw), where(skip, 0.0, ret / e))
    return solve(vh, matmul(ret, vh))


def _eig_jvp(t: Any, out: Any, a: Any, via: str = "eig") -> Any:
    # PyTorch's linalg_eig_jvp: dL = diag(V^{-1} dA V), dV = V (F o V^{-1} dA V), normalised: Re(v^H dv) = 0
    w, v = _split_eig(out)
    if _repeated(w).any():
        raise _repeated_error(via, "its forward-mode tangent needs them")
    n = _shape(w)[-1]
    dp = solve(v, matmul(t, v))
    e = where(_eye(n), 1.0, expand_dims(w, -2) - expand_dims(w, -1))
    dv = matmul(v, where(_eye(n), 0.0, dp / e))
    dv = dv - v * expand_dims(real(sum(conj(v) * dv, axis=-2)), -2)
    return concatenate([expand_dims(_diag(dp), -2), dv], axis=-2)


EIG = defprim("eig", _eig_forward, vjps=(_eig_vjp,), jvps=(_eig_jvp,), saves="out", flops=_flops_cubic(25),
              kind="matmul", autocast="float32", complex="own",
              hint="The matrix must be square, (..., n, n).")


def _eigvals_forward(a: Any) -> Any:
    w = np.linalg.eigvals(a)
    return w.astype(_complex_of(w.dtype))


def _eigvals_vjp(g: Any, out: Any, a: Any) -> Any:
    v = apply(EIG, (a,), {"via": "eigvals"})[..., 1:, :]      # the eig primitive: recorded under create_graph
    vh = _mh(v)
    return solve(vh, matmul(_diag_embed(g), vh))     # V^{-H} diag(g) V^H


def _eigvals_jvp(t: Any, out: Any, a: Any) -> Any:
    v = apply(EIG, (a,), {"via": "eigvals"})[..., 1:, :]
    return _diag(solve(v, matmul(t, v)))             # diag(V^{-1} dA V)


EIGVALS = defprim("eigvals", _eigvals_forward, vjps=(_eigvals_vjp,), jvps=(_eigvals_jvp,), saves="x",
                  flops=_flops_cubic(10), kind="matmul", autocast="float32", complex="own",
                  hint="The matrix must be square, (..., n, n).")


def _check_square(a: Any, op: str) -> None:
    s = _shape(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ShapeError(f"{op}: needs square matrices (..., n, n), got shape {s}")


def eig(a: Any) -> EigResult:
    """Eigenvalues and right eigenvectors (unit norm, columns), as ``numpy.linalg.eig`` but always
    complex, as ``torch.linalg.eig``; differentiable where the loss does not depend on the
    eigenvectors' phases and the eigenvalues are distinct.

    >>> import chainrule as cr
    >>> cr.linalg.eig(cr.tensor([[2.0, 0.0], [0.0, 3.0]])).eigenvalues
    tensor([2.+0.j, 3.+0.j])
    """
    _check_square(a, "eig")
    out = apply(EIG, (a,))
    w, v = _split_eig(out)
    return EigResult(w, v)


def eigvals(a: Any) -> Any:
    """Eigenvalues (complex), as ``numpy.linalg.eigvals`` / ``torch.linalg.eigvals``.

    >>> import chainrule as cr
    >>> cr.linalg.eigvals(cr.tensor([[0.0, -1.0], [1.0, 0.0]]))
    tensor([0.+1.j, 0.-1.j])
    """
    _check_square(a, "eigvals")
    return apply(EIGVALS, (a,))


# ----- qr -----
class QRResult(NamedTuple):
    """``(Q, R)``, with NumPy's field names."""
    Q: Any
    R: Any


def _qr_forward(a: Any, mode: str, k: int) -> Any:
    q, r = np.linalg.qr(a, mode)
    m = q.shape[-2]
    if r.shape[-2] < m:
        r = np.concatenate([r, np.zeros(r.shape[:-2] + (m - r.shape[-2], r.shape[-1]), r.dtype)], axis=-2)
    return np.concatenate([q, r], axis=-1)


def _qr_parts(out: Any, k: int) -> tuple:
    """Q (m, k) and R (k, n) out of the packed output (k = min(m, n), or m in mode 'complete')."""
    m, total = _shape(out)[-2:]
    return out[..., :k], out[..., :k, k:], m, total - k


def _check_qr(mode: str, m: int, n: int, r: Any) -> None:
    if mode == "complete" and m > n:
        raise ValueError(f"qr: not differentiable in mode='complete' with more rows than columns (an "
                         f"({m}, {n}) input): the last {m - n} columns of Q are not unique (as in PyTorch); "
                         f"use mode='reduced'")
    d = np.abs(np.diagonal(whole_batch(r)[..., :min(m, n), :min(m, n)], 0, -2, -1))
    eps = np.finfo(np.float32 if d.dtype.itemsize < 4 else d.dtype).eps      # 16-bit: float32's
    d = d.astype(np.float64)
    # (numpy.linalg.matrix_rank's tolerance: max(m, n) * eps * the largest; LAPACK leaves ~1e-15, not 0)
    if (d <= max(m, n) * eps * np.maximum(d.max(axis=-1, keepdims=True, initial=0), 1e-300)).any():
        raise ValueError(f"qr: not differentiable at a rank-deficient ({m}, {n}) input (R has a zero on its "
                         f"diagonal, so the factors' derivatives are infinite)")


def _copyltu(m: Any) -> Any:
    """triu(M, 1) + triu(M, 1)^H + Re diag(M): the adjoint of C -> triu(C, 1) + tril(C, -1)^H + Re diag(C)."""
    u = triu(m, 1)
    return u + _mh(u) + _diag_embed(real(_diag(m)))


def _right_solve_rh(b: Any, r: Any) -> Any:
    """B R^{-H} for upper-triangular R."""
    return _mh(solve_triangular(r, _mh(b), lower=False, check_finite=False))


def _right_solve_r(b: Any, r: Any) -> Any:
    """B R^{-1} for upper-triangular R."""
    return _t(solve_triangular(r, _t(b), trans=1, lower=False, check_finite=False))


def _qr_square_vjp(gq: Any, gr: Any, q: Any, r: Any) -> Any:
    # gA = (gQ + Q copyltu(gR R^H - Q^H gQ)) R^{-H}   (A = QR with Q of full column rank n, R n x n)
    mm = matmul(gr, _mh(r)) - matmul(_mh(q), gq)
    return _right_solve_rh(gq + matmul(q, _copyltu(mm)), r)


def _qr_vjp(g: Any, out: Any, a: Any, mode: str, k: int) -> Any:
    q, r, m, n = _qr_parts(out, k)
    _check_qr(mode, m, n, r)
    gq, gr = g[..., :k], g[..., :k, k:]
    if m >= n:
        return _qr_square_vjp(gq, gr, q, r)
    # m < n: A = Q [R1 | R2]; R2 = Q^H A2 adds A2 gR2^H to Q's cotangent, and Q gR2 to A2's
    r1, r2, gr1, gr2 = r[..., :m], r[..., m:], gr[..., :m], gr[..., m:]
    gq = gq + matmul(matmul(q, r2), _mh(gr2))
    return concatenate([_qr_square_vjp(gq, gr1, q, r1), matmul(q, gr2)], axis=-1)


def _qr_square_jvp(t: Any, q: Any, r: Any) -> tuple:
    # C = Q^H dA R^{-1} = Omega (skew-Hermitian) + U (upper, real diagonal): dR = U R, dQ = dA R^{-1} - Q U
    dar = _right_solve_r(t, r)
    c = matmul(_mh(q), dar)
    u = triu(c, 1) + _mh(tril(c, -1)) + _diag_embed(real(_diag(c)))
    return dar - matmul(q, u), matmul(u, r), c - u


def _qr_jvp(t: Any, out: Any, a: Any, mode: str, k: int) -> Any:
    q, r, m, n = _qr_parts(out, k)
    _check_qr(mode, m, n, r)
    if m >= n:
        dq, dr, _ = _qr_square_jvp(t, q, r)
        if m > n:                                  # R's zero padding
            dr = concatenate([dr, np.zeros(_shape(dr)[:-2] + (m - n, n), raw(dr).dtype)], axis=-2)
        return concatenate([dq, dr], axis=-1)
    dq, dr1, omega = _qr_square_jvp(t[..., :m], q, r[..., :m])
    dr2 = matmul(_mh(q), t[..., m:]) - matmul(omega, r[..., m:])
    return concatenate([dq, dr1, dr2], axis=-1)


QR = defprim("qr", _qr_forward, vjps=(_qr_vjp,), jvps=(_qr_jvp,), saves="out",
             flops=lambda out, a, mode, k: 4 * int(np.size(a)) * k, kind="matmul", autocast="float32",
             complex="own", hint="The input must be a matrix, (..., m, n).")


def qr(a: Any, mode: str = "reduced") -> Any:
    """QR decomposition as ``numpy.linalg.qr``: ``QRResult(Q, R)`` for mode 'reduced' or 'complete',
    R alone for mode 'r'. Differentiable as ``torch.linalg.qr``: 'reduced' and 'r' for any shape of
    full rank, 'complete' when m <= n.

    >>> import chainrule as cr
    >>> q, r = cr.linalg.qr(cr.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> r
    tensor([[-5. , -2.2],
            [ 0. ,  0.4]])
    """
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    s = _shape(a)
    if len(s) < 2:
        raise ShapeError(f"qr: needs matrices (..., m, n), got shape {s}")
    if mode == "raw":
        if isinstance(a, Tensor) and a.requires_grad:
            raise ValueError("qr: mode='raw' (Householder reflectors) is not differentiable; use mode='reduced'")
        if isinstance(a, Tensor) and a._level:
            return tuple(_per_batch(lambda v, i=i: np.linalg.qr(v, "raw")[i], a) for i in (0, 1))
        h, tau = np.linalg.qr(raw(a), "raw")
        return (_wrap(h), _wrap(tau)) if isinstance(a, Tensor) else (h, tau)
    m, n = s[-2:]
    k = m if mode == "complete" else min(m, n)
    out = apply(QR, (a,), {"mode": "complete" if mode == "complete" else "reduced", "k": k})
    r = out[..., :k, k:]
    return r if mode == "r" else QRResult(out[..., :k], r)


# ----- matrix_exp -----
def _frechet(a: Any, e: Any) -> Any:
    """L(A, E), the derivative of expm at A along E: the upper-right block of expm([[A, E], [0, A]])."""
    n = _shape(a)[-1]
    shape = np.broadcast_shapes(_shape(a), _shape(e))
    dtype = np.result_type(raw(a).dtype, raw(e).dtype)
    zero = np.zeros(shape, dtype)
    top = concatenate([a + zero, e + zero], axis=-1)
    bottom = concatenate([zero, a + zero], axis=-1)
    return apply(MATRIX_EXP, (concatenate([top, bottom], axis=-2),))[..., :n, n:]


MATRIX_EXP = defprim("matrix_exp", lambda a: scipy.linalg.expm(a),
                     vjps=(lambda g, out, a: _frechet(_t(a), g),),     # analytic L(A^T, G); conjugated: L(A^H, G)
                     jvps=(lambda t, out, a: _frechet(a, t),), saves="x", flops=_flops_cubic(20),
                     kind="matmul", autocast="float32", complex="holomorphic",
                     hint="The matrix must be square, (..., n, n).")


def matrix_exp(a: Any) -> Any:
    """Matrix exponential (``scipy.linalg.expm``, ``torch.linalg.matrix_exp``), batched.

    >>> import chainrule as cr
    >>> cr.linalg.matrix_exp(cr.tensor([[0.0, 1.0], [0.0, 0.0]]))
    tensor([[1., 1.],
            [0., 1.]])
    """
    _check_square(a, "matrix_exp")
    return apply(MATRIX_EXP, (a,))


# ----- solve_triangular, cho_solve -----
_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2, "n": 0, "t": 1, "c": 2}


def _st_forward(a: Any, b: Any, trans: int, lower: bool, unit_diagonal: bool, vec: bool,
                check_finite: bool = False) -> Any:
    return scipy.linalg.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal,
                                         check_finite=check_finite)


def _st(a: Any, b: Any, trans: int, lower: bool, unit_diagonal: bool, vec: bool) -> Any:
    """The primitive, in a rule: a vector right-hand side batched by a's batch, (..., n), is solved as
    (..., n, 1) (SciPy reads a 2-D b as a matrix)."""
    if vec and len(_shape(b)) > 1:
        return _st(a, expand_dims(b, -1), trans, lower, unit_diagonal, False)[..., 0]
    return apply(SOLVE_TRIANGULAR, (a, b), {"trans": trans, "lower": lower, "unit_diagonal": unit_diagonal,
                                            "vec": vec})


def _triangle(x: Any, lower: bool, unit_diagonal: bool) -> Any:
    """The entries of the triangle that solve_triangular reads."""
    return tril(x, -int(unit_diagonal)) if lower else triu(x, int(unit_diagonal))


def _op(x: Any, trans: int) -> Any:
    return x if trans == 0 else _t(x) if trans == 1 else _mh(x)


def _st_vjp_b(g: Any, out: Any, a: Any, b: Any, trans: int, lower: bool, unit_diagonal: bool, vec: bool,
              **_: Any) -> Any:
    # op(T)^{-H} g: T^H (trans 0) -> 'C'; conj(T) (trans 1) -> conj(T^{-1} conj g); T (trans 2) -> 'N'
    if trans == 0:
        return _st(a, g, 2, lower, unit_diagonal, vec)
    if trans == 1 and (_is_complex(a) or _is_complex(g)):
        return conj(_st(a, conj(g), 0, lower, unit_diagonal, vec))
    return _st(a, g, 0, lower, unit_diagonal, vec)


def _st_vjp_a(g: Any, out: Any, a: Any, b: Any, trans: int, lower: bool, unit_diagonal: bool, vec: bool,
              **_: Any) -> Any:
    gb = _st_vjp_b(g, out, a, b, trans, lower, unit_diagonal, vec)
    xh = conj(out) if _is_complex(out) else out
    gm = -(expand_dims(gb, -1) * expand_dims(xh, -2) if vec else matmul(gb, _t(xh)))   # -op(T)^{-H} g x^H
    return _triangle(_op(gm, trans), lower, unit_diagonal)


def _st_jvp_a(t: Any, out: Any, a: Any, b: Any, trans: int, lower: bool, unit_diagonal: bool, vec: bool,
              **_: Any) -> Any:
    dm = _op(_triangle(t, lower, unit_diagonal), trans)
    rhs = matmul(dm, expand_dims(out, -1))[..., 0] if vec else matmul(dm, out)
    return -_st(a, rhs, trans, lower, unit_diagonal, vec)


SOLVE_TRIANGULAR = defprim(
    "solve_triangular", _st_forward, vjps=(_st_vjp_a, _st_vjp_b),
    jvps=(_st_jvp_a, lambda t, out, a, b, trans, lower, unit_diagonal, vec, **_: _st(a, t, trans, lower,
                                                                                   unit_diagonal, vec)),
    saves="x out", needs={0: (0,), 1: (0,)},
    flops=lambda out, a, b, **p: int(np.size(out)) * int(np.shape(a)[-1]), kind="matmul", autocast="float32",
    complex="own", hint="a must be square (..., n, n) and b of shape (n,) or (..., n, k).")


def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """Solve ``op(a) x = b`` for triangular ``a`` (``scipy.linalg.solve_triangular``; ``op`` is the
    identity, transpose or conjugate transpose for trans 0/'N', 1/'T', 2/'C'); batched over leading
    dimensions. Only the triangle that is read gets a gradient (not the diagonal if unit_diagonal).

    >>> import chainrule as cr
    >>> cr.linalg.solve_triangular(cr.tensor([[2.0, 1.0], [0.0, 4.0]]), cr.tensor([4.0, 8.0]))
    tensor([1., 2.])
    """
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    _check_square(a, "solve_triangular")
    sb = _shape(b)
    if not sb or sb[-2 if len(sb) > 1 else 0] != _shape(a)[-1]:
        raise ShapeError(f"solve_triangular: a of shape {_shape(a)} and b of shape {sb} do not match (b must be "
                         f"(n,) or (..., n, k) with n = {_shape(a)[-1]})")
    params = {"trans": _TRANS[trans], "lower": bool(lower), "unit_diagonal": bool(unit_diagonal),
              "vec": len(sb) == 1}
    if check_finite:
        params["check_finite"] = True
    return apply(SOLVE_TRIANGULAR, (a, b), params)


def cho_solve(c_and_lower: tuple, b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """Solve ``A x = b`` given the Cholesky factor ``c`` of A, from ``(c, lower)``
    (``scipy.linalg.cho_solve``): two triangular solves, so ``c`` (its triangle) and ``b`` both get
    gradients.

    >>> import chainrule as cr
    >>> cr.linalg.cho_solve((cr.tensor([[2.0, 0.0], [1.0, 1.0]]), True), cr.tensor([4.0, 3.0]))
    tensor([0.5, 1. ])
    """
    c, lower = c_and_lower
    if lower:                          # A = L L^H
        y = solve_triangular(c, b, lower=True, check_finite=check_finite)
        return solve_triangular(c, y, trans=2, lower=True, check_finite=False)
    y = solve_triangular(c, b, trans=2, lower=False, check_finite=check_finite)      # A = U^H U
    return solve_triangular(c, y, lower=False, check_finite=False)


# ----- batching rules (cr.vmap) -----
def _batch_solve_triangular(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    return _batch_solve_like(prim, xs, batched, dict(params, vec=False), size, params["vec"])


for _prim in (EIG, EIGVALS, QR, MATRIX_EXP):
    set_batch(_prim, batch_unary)
set_batch(SOLVE_TRIANGULAR, _batch_solve_triangular)
