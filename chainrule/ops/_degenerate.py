"""Clusters of (nearly) equal eigenvalues or singular values, and the checks that refuse, with a
message naming what works, the derivatives the cotangent does not determine there (``spectral``'s
rules call them; see its docstring for the rule).

>>> import numpy as np
>>> _near(np.array([1.0, 1.0, 3.0]))[0].astype(int).tolist()
[[0, 1, 0], [1, 0, 0], [0, 0, 0]]
"""
from __future__ import annotations

from typing import Any

from chainrule.core._backend import np
from chainrule.core._registry import raw
from chainrule.core.batched import whole_batch
from chainrule.core.grad_mode import STATE


def _eps(dtype: Any) -> float:
    try:
        return float(np.finfo(dtype).eps)
    except (TypeError, ValueError):           # bfloat16 / FP8 without NumPy finfo
        return 2.0 ** -7


def _gap_rtol(dtype: Any) -> float:
    return max(1e-10, 10 * _eps(dtype))


def _max_abs(x: Any, axes: tuple = (-2, -1)) -> Any:
    xd = whole_batch(x)
    return np.abs(xd).max(axis=axes, keepdims=True, initial=0) if xd.size else np.zeros(())


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


def _significant(t: Any, near: Any) -> Any:
    """Where in the clusters ``near`` the tangent or cotangent ``t`` is not ~0 (relative to its largest)."""
    td = np.abs(whole_batch(t))
    return near & (td > np.sqrt(_eps(td.dtype)) * _max_abs(t))


def _first_repeated(bad: Any, near: Any, wd: Any) -> float | None:
    """The repeated value (of ``wd``) at the first entry where ``bad`` holds; None where none does."""
    if not bad.any():
        return None
    idx = _first(bad, near.shape)
    return float(np.broadcast_to(wd, near.shape[:-1])[idx[:-1]])


def _check_inside(x: Any, near: Any, wd: Any, op: str, kind: str) -> None:
    """Reverse mode through eigvalsh's/svdvals' own derivative rules (a gradient of a jvp, a third
    derivative): inside a cluster those rules use the basis their tangent picks, which a reverse pass
    cannot follow. Raise where its cotangent reaches a cluster."""
    at = _first_repeated(_reaching(x, near), near, wd)
    if at is not None:
        raise ValueError(
            f"{op}: a reverse-mode derivative of its derivative (cr.grad of a cr.jvp, or a third derivative) at "
            f"repeated {kind} ({at:.8g}) is not supported: "
            f"inside the repeated block the rules use the basis that the tangent picks, which reverse mode cannot "
            f"follow. Second derivatives are exact with cr.hvp, cr.jvp(cr.grad(f)) and cr.hessian; or split the "
            f"{kind} (perturb the matrix)")


def _check_order(x: Any, near: Any, p: Any, w: Any, op: str, kind: str, order: int) -> None:
    """A rule whose tangent is a derivative of ``order``, differentiated by more than one outer forward
    level: its adapted basis is exact for one more order only (the next needs the basis' derivative)."""
    tans = getattr(x, "_tangents", None)
    if tans and len([lv for lv in tans if lv <= STATE.fw_visible and lv in STATE.fw_levels]) > 1:
        cluster = near | np.eye(near.shape[-1], dtype=bool)
        if _significant(p, cluster & np.broadcast_to(near.any(axis=-1, keepdims=True), near.shape)).any():
            raise ValueError(f"{op}: derivatives of order {order + 2} and higher at repeated {kind} by nested "
                             f"forward mode are not supported (they need the derivative of the basis inside the "
                             f"repeated block); second derivatives are exact (cr.hvp, cr.hessian, jvp of jvp), and "
                             f"third ones along one direction (cr.jvp of cr.hvp); or split the {kind} (perturb "
                             f"the matrix)")


def _check_mixed(p: Any, near: Any, w: Any, op: str, kind: str) -> None:
    """A third derivative along different directions needs the derivative of the divided differences
    inside a cluster, which is not computed: raise where the tangent, in the basis its outer
    directions pick, still reaches the cluster's off-diagonal entries."""
    at = _first_repeated(_significant(p, near), near, whole_batch(w))
    if at is not None:
        raise ValueError(
            f"{op}: third (and higher) derivatives of a function of the {kind} along different directions at "
            f"repeated {kind} ({at:.8g}) are not "
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
    at = _first_repeated(_significant(x, near), near, wd)
    if at is not None:
        raise _second_order_error(op, kind, at)


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
