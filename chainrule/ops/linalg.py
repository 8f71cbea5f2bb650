"""Linear algebra. Primitives: matmul, einsum, inv, solve, det, logdet, cholesky; the rest composite.

FLOPs: a matmul (m x k)(k x n) counts 2mkn; einsum counts 2 x the product of all index sizes per
pairwise contraction; inv/solve/det/cholesky count the usual O(n^3) constants (2n^3, 2n^3/3 ...).
Matmul-class ops on 16-bit or FP8 inputs accumulate in float32 and round the result once.
"""
from __future__ import annotations

import math
import string
from typing import Any, NamedTuple

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, accum_dtype
from chainrule.core._registry import apply, defprim, no_out, raw
from chainrule.core.batched import batched_like, whole_batch
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.core.tensor import wrap as _wrap
from chainrule.ops._batching import batch_unary, example_ndim, lift, set_batch, transpose
from chainrule.ops._batching import reshape as _breshape
from chainrule.ops.elementwise import add, astype, conj, exp
from chainrule.ops.reduction import _prod_others, sum
from chainrule.ops.shape import broadcast_to, expand_dims, imag, ravel, real, reshape, squeeze, swapaxes


def _accumulating(fn: Any, *xs: Any) -> Any:
    """``fn(*xs)`` computed in the accumulation dtype of the inputs' result dtype (float32 for 16-bit
    and FP8) and rounded to that dtype once (the ops declared ``accumulate=True``)."""
    dtype = np.result_type(*[x.dtype for x in xs])
    acc = accum_dtype(dtype)
    return fn(*[x.astype(acc) for x in xs]).astype(dtype)


def _matmul_forward(x: Any, y: Any) -> Any:
    if getattr(x, "dtype", None) in LOW_PRECISION or getattr(y, "dtype", None) in LOW_PRECISION:
        return _accumulating(np.matmul, x, y)
    if x.ndim > 2 and x.shape[-1] == 1 and y.ndim > 1:
        # stacked outer products (per-example weight gradients under vmap): NumPy runs matmul as
        # one small product per matrix, 2-3x slower than the broadcast multiply (the same numbers)
        return np.multiply(x, y)
    return np.matmul(x, y)


def _matmul_flops(out: Any, x: Any, y: Any) -> int:
    k = np.shape(x)[-1]
    return 2 * int(np.size(out)) * int(k)


# The matmul rules run on every backward of every model: they use methods and indexing, which are
# chainrule ops on Tensors and C calls on ndarrays, and _mm, which skips matmul's argument checks.
def _mm(x: Any, y: Any) -> Any:
    return apply(MATMUL, (x, y))


# Each rule reads only the other operand (x is not kept when only x needs a gradient, as in
# PyTorch), so an operand's rank is read off the cotangent's: g.ndim < y.ndim only when x is 1-D.
def _matmul_vjp_x(g: Any, out: Any, x: Any, y: Any) -> Any:
    if y.ndim == 1:                      # (..., k) @ (k,) -> (...): gx = g[..., None] * y
        return g[..., None] * y
    if g.ndim < y.ndim:                      # (k,) @ (..., k, n) -> (..., n): gx = y g, batch summed by _fit
        return _mm(y, g) if y.ndim == 2 else _mm(y, g[..., None])[..., 0]
    return _mm(g, y.swapaxes(-1, -2))


def _matmul_vjp_y(g: Any, out: Any, x: Any, y: Any) -> Any:
    if x.ndim == 1:                      # gy = x[:, None] * g[..., None, :]
        if g.ndim == 0:
            return g * x
        return x[:, None] * g[..., None, :]
    if g.ndim < x.ndim:                  # (..., m, k) @ (k,) -> (..., m): gy = x^T g (= g x for 2-D x)
        return _mm(g, x) if x.ndim == 2 else _mm(x.swapaxes(-1, -2), g[..., None])[..., 0]
    return _mm(x.swapaxes(-1, -2), g)


MATMUL = defprim("matmul", _matmul_forward, vjps=(_matmul_vjp_x, _matmul_vjp_y), jvps="linear",
                 saves="x y", needs={0: (1,), 1: (0,)}, flops=_matmul_flops, accumulate=True, autocast="low",
                 kind="matmul", hint="The last axis of the first input must match the second-to-last "
                                     "axis of the second (for 1-D inputs, their only axis).", complex="holomorphic")


def _linear_forward(x: Any, w: Any, b: Any) -> Any:
    if getattr(x, "dtype", None) in LOW_PRECISION or getattr(w, "dtype", None) in LOW_PRECISION:
        return _accumulating(lambda xa, wa: np.matmul(xa, wa.T) + b, x, w)   # the bias too, then one rounding
    out = np.matmul(x, w.T)
    out += b                  # in place on the fresh product: one temporary fewer than x @ w.T + b
    return out


def _linear_vjp_w(g: Any, out: Any, x: Any, w: Any, b: Any) -> Any:
    n_out, n_in = w.shape
    return matmul(swapaxes(reshape(g, (-1, n_out)), -1, -2), reshape(x, (-1, n_in)))


# Fused for speed: torch.nn.functional.linear's x @ w.T + b (w of shape (out, in)) as one node.
# The bias's cotangent is g itself: the engine sums it back to the bias's shape.
LINEAR = defprim("linear", _linear_forward,
                 vjps=(lambda g, out, x, w, b: matmul(g, w), _linear_vjp_w, lambda g, out, x, w, b: g),
                 jvps=(lambda t, out, x, w, b: matmul(t, swapaxes(w, -1, -2)),
                       lambda t, out, x, w, b: matmul(x, swapaxes(t, -1, -2)),
                       lambda t, out, x, w, b: t),
                 saves="x y", needs={0: (1,), 1: (0, 1), 2: ()},
                 flops=lambda out, x, w, b: 2 * int(np.size(out)) * int(np.shape(w)[1]) + int(np.size(out)),
                 accumulate=True, autocast="low", kind="matmul",
                 hint="x must end in in_features = w.shape[1]; b has w.shape[0] elements.", complex="holomorphic")


def linear(x: Any, w: Any, b: Any) -> Any:
    """``x @ w.T + b`` as one primitive (w has shape (out_features, in_features), as in PyTorch).

    >>> import chainrule as cr
    >>> cr.numpy.linear(cr.tensor([[1.0, 2.0]]), cr.tensor([[3.0, 4.0]]), cr.tensor([0.5]))
    tensor([[11.5]])
    """
    return apply(LINEAR, (x, w, b))


def _einsum_forward(*xs: Any, spec: str) -> Any:
    if any(getattr(x, "dtype", None) in LOW_PRECISION for x in xs):
        return _accumulating(lambda *ys: np.einsum(spec, *ys, optimize=len(xs) > 2), *xs)
    return np.einsum(spec, *xs, optimize=len(xs) > 2)


def _einsum_vjp(g: Any, out: Any, *xs: Any, spec: str, argnum: int) -> Any:
    ins, outs = spec.split("->")
    labels = ins.split(",")
    target = labels[argnum]
    others = [x for i, x in enumerate(xs) if i != argnum]
    other_labels = [lab for i, lab in enumerate(labels) if i != argnum]
    unique = "".join(dict.fromkeys(target))
    sizes = dict(zip(target, raw(xs[argnum]).shape))
    # labels of the target missing from g and the other operands are summed out: broadcast back
    present = set(outs) | set("".join(other_labels))
    missing = [c for c in unique if c not in present]
    kept = "".join(c for c in unique if c in present)
    grad = einsum(f"{','.join([outs, *other_labels])}->{kept}", g, *others)
    if missing:
        grad = broadcast_to(reshape(grad, tuple(sizes[c] if c in kept else 1 for c in unique)),
                            tuple(sizes[c] for c in unique))
    if unique == target:
        return grad
    # repeated labels (a diagonal, e.g. "ii->"): put the gradient back on the diagonal
    fresh = iter(c for c in string.ascii_letters if c not in spec)
    renamed, eyes, seen = "", [], set()
    for c in target:
        if c in seen:
            d = next(fresh)
            renamed += d
            eyes.append((c + d, np.eye(sizes[c], dtype=raw(g).dtype)))
        else:
            renamed += c
            seen.add(c)
    operands = [grad] + [e for _, e in eyes]
    return einsum(",".join([unique] + [lab for lab, _ in eyes]) + "->" + renamed, *operands)


def _einsum_flops(out: Any, *xs: Any, spec: str) -> int:
    ins = spec.split("->")[0].split(",")
    sizes: dict = {}
    for lab, x in zip(ins, xs):
        sizes.update(zip(lab, np.shape(x)))
    total = int(np.prod(list(sizes.values()))) if sizes else 1
    return max(len(xs) - 1, 1) * 2 * total if len(xs) > 1 else total


EINSUM = defprim("einsum", _einsum_forward, vjps=(_einsum_vjp,), jvps="linear", saves="xs",
                 variadic=True, flops=_einsum_flops, accumulate=True, autocast="low", kind="matmul",
                 complex="holomorphic")


def _t(x: Any) -> Any:
    return swapaxes(x, -1, -2)


INV = defprim("inv", np.linalg.inv,
              vjps=(lambda g, out, x: -matmul(matmul(_t(out), g), _t(out)),),
              jvps=(lambda t, out, x: -matmul(matmul(out, t), out),), saves="out",
              flops=lambda out, x: 2 * int(np.size(x)) * int(np.shape(x)[-1]), kind="matmul",
              autocast="float32", hint="The matrix must be square and non-singular.", complex="holomorphic")


def _vector_rhs(out: Any, a: Any) -> bool:
    """Was b a vector? (NumPy 2: only a 1-D b is; then out has a's shape minus one axis.)"""
    return np.ndim(out) == np.ndim(a) - 1


def _solve_vjp_a(g: Any, out: Any, a: Any, b: Any) -> Any:
    if _vector_rhs(out, a):
        return -expand_dims(_solve_vjp_b(g, out, a, b), -1) * expand_dims(out, -2)
    return -matmul(solve(_t(a), g), _t(out))


def _solve_vjp_b(g: Any, out: Any, a: Any, b: Any) -> Any:
    if _vector_rhs(out, a) and np.ndim(g) > 1:      # a batch of vectors: solve them as columns
        return squeeze(solve(_t(a), expand_dims(g, -1)), -1)
    return solve(_t(a), g)


def _solve_jvp_a(t: Any, out: Any, a: Any, b: Any) -> Any:
    if _vector_rhs(out, a):
        rhs = squeeze(matmul(t, expand_dims(out, -1)), -1)
        return -(squeeze(solve(a, expand_dims(rhs, -1)), -1) if np.ndim(rhs) > 1 else solve(a, rhs))
    return -solve(a, matmul(t, out))


SOLVE = defprim("solve", np.linalg.solve,
                vjps=(_solve_vjp_a, _solve_vjp_b),
                jvps=(_solve_jvp_a, lambda t, out, a, b: solve(a, t)), saves="x out",
                flops=lambda out, a, b: 2 * int(np.size(a)) * int(np.shape(a)[-1]) // 3
                + 2 * int(np.size(out)) * int(np.shape(a)[-1]), kind="matmul", autocast="float32",
                hint="a must be square (..., n, n) and b of shape (..., n) or (..., n, k).", complex="holomorphic")


def _cofactor(x: Any, out: Any) -> Any:
    """d det(x) / dx = adj(x)^T, finite everywhere. det(x) inv(x)^T is cheap and accurate when x is
    well conditioned; at a singular or ill-conditioned x (where inv fails or loses digits) the
    cofactor matrix comes from the SVD, or, when the rule must itself be differentiable (Tensors:
    create_graph, forward-over-reverse), from the minors' determinants, whose rule recurses."""
    xd = whole_batch(x)
    try:
        x_inv = np.linalg.inv(xd)
    except np.linalg.LinAlgError:              # an exactly singular matrix somewhere in the batch
        x_inv = None
    if x_inv is not None:
        # condition number, estimated within a factor n from the largest entries of x and inv(x)
        # (two cheap reductions); NaN inputs compare False and keep the cheap formula
        cond = xd.shape[-1] * _max_abs(xd) * _max_abs(x_inv)
        if not (cond * np.sqrt(np.finfo(x_inv.dtype).eps) > 1).any():
            scale = expand_dims(expand_dims(out, -1), -1)
            return scale * _t(inv(x) if isinstance(x, Tensor) else x_inv)
    return _cofactor_by_minors(x) if isinstance(x, Tensor) else _cofactor_by_svd(xd)


def _max_abs(x: Any) -> Any:
    return np.abs(x).max(axis=(-2, -1), initial=0)


def _cofactor_by_svd(x: Any) -> Any:
    # x = u diag(s) v^T  =>  adj(x)^T = det(u) det(v) u diag(prod_{j != i} s_j) v^T, exact at rank < n
    u, s, vt = np.linalg.svd(x)
    others = _prod_others(s, (s.ndim - 1,))
    sign = np.linalg.det(u) * np.linalg.det(vt)
    return sign[..., None, None] * np.matmul(np.conj(u) * others[..., None, :], np.conj(vt))   # (conj: complex x)


def _cofactor_by_minors(x: Any) -> Any:
    # cof_ij = (-1)^(i+j) det(x without row i and column j): n^2 determinants of size n - 1
    n = x.shape[-1]
    if np.size(raw(x)) * n * n > 2 ** 26:
        raise ValueError(f"det: differentiating the gradient of det at a singular or ill-conditioned "
                         f"{x.shape} matrix "
                         f"needs its n^2 minors ({np.size(raw(x)) * n * n} elements); regularise it "
                         f"(x + eps * I) or take the gradient without create_graph")
    keep = np.array([[j for j in range(n) if j != i] for i in range(n)], dtype=np.intp).reshape(n, n - 1)
    minors = x[..., keep[:, None, :, None], keep[None, :, None, :]]
    signs = (-1.0) ** np.add.outer(np.arange(n), np.arange(n))
    return det(minors) * signs.astype(raw(x).dtype)


def _det_vjp(g: Any, out: Any, x: Any) -> Any:
    return expand_dims(expand_dims(g, -1), -1) * _cofactor(x, out)


def _det_jvp(t: Any, out: Any, x: Any) -> Any:
    return sum(_cofactor(x, out) * t, axis=(-2, -1))           # trace(adj(x) t)


def _logdet_forward(x: Any) -> Any:
    sign, logabs = np.linalg.slogdet(x)
    return logabs + 1j * np.angle(sign) if sign.dtype.kind == "c" else logabs


def _logdet_inv_t(x: Any, out: Any) -> Any:
    if np.isneginf(np.real(whole_batch(out))).any():
        raise ValueError(f"slogdet: the gradient of log|det(x)| (log det(x) for complex x) is inv(x)^T, which "
                         f"does not exist: the {raw(x).shape} input is singular (log|det| = -inf); regularise it "
                         f"(x + eps * I), or differentiate cr.linalg.det, whose gradient is finite there")
    return _t(inv(x))


DET = defprim("det", np.linalg.det, vjps=(_det_vjp,), jvps=(_det_jvp,), saves="x out",
              flops=lambda out, x: 2 * int(np.size(x)) * int(np.shape(x)[-1]) // 3, kind="matmul",
              autocast="float32", complex="holomorphic")
# log|det x| for real x; log det x = log|det x| + i arg det x for complex x: holomorphic, derivative inv(x)^T
LOGDET = defprim("logdet", _logdet_forward,
                 vjps=(lambda g, out, x: expand_dims(expand_dims(g, -1), -1) * _logdet_inv_t(x, out),),
                 jvps=(lambda t, out, x: sum(_logdet_inv_t(x, out) * t, axis=(-2, -1)),), saves="x out",
                 flops=lambda out, x: 2 * int(np.size(x)) * int(np.shape(x)[-1]) // 3, kind="matmul",
                 autocast="float32", complex="holomorphic")


def _mh(x: Any) -> Any:
    """Conjugate transpose (the transpose for real data)."""
    return conj(_t(x)) if _dtype(x).kind == "c" else _t(x)


def _phi(x: Any) -> Any:
    """Lower triangle with the diagonal halved."""
    n = x.shape[-1]
    return x * (np.tril(np.ones((n, n)), -1) + 0.5 * np.eye(n)).astype(np.result_type(raw(x).dtype, np.float32))


def _cholesky_vjp(g: Any, out: Any, x: Any, upper: bool = False) -> Any:
    # Murray (2016), arXiv 1602.07527, with conjugate transposes: gA = L^{-H} Phi(L^H gL) L^{-1},
    # made Hermitian because only a Hermitian input is meaningful; U = L^H, so gL = gU^H
    low, gl = (_mh(out), _mh(g)) if upper else (out, g)
    l_inv = inv(low)
    ga = matmul(matmul(_mh(l_inv), _phi(matmul(_mh(low), gl))), l_inv)
    return 0.5 * (ga + _mh(ga))


def _cholesky_jvp(t: Any, out: Any, x: Any, upper: bool = False) -> Any:
    low = _mh(out) if upper else out
    l_inv = inv(low)
    dl = matmul(low, _phi(matmul(matmul(l_inv, t), _mh(l_inv))))
    return _mh(dl) if upper else dl


CHOLESKY = defprim("cholesky", lambda x, upper=False: np.linalg.cholesky(x, upper=upper),
                   vjps=(_cholesky_vjp,), jvps=(_cholesky_jvp,), saves="out",
                   flops=lambda out, x, **p: int(np.size(x)) * int(np.shape(x)[-1]) // 3,
                   kind="matmul", autocast="float32", complex="own",
                   hint="The matrix must be symmetric (Hermitian) positive definite.")


# ----- batching rules (cr.vmap) -----
def _drop(x: Any, axis: int) -> Any:
    """``x`` without its length-1 axis ``axis`` (negative)."""
    shape = list(np.shape(x))
    del shape[axis]
    return _breshape(x, tuple(shape))


def _batch_matmul(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    x, y = xs
    bx, by = batched
    nx, ny = example_ndim(x, bx), example_ndim(y, by)
    if not by and ny == 2:
        # a shared matrix: the batch (and x's own batch dims) fold into the rows, one GEMM
        sx = tuple(np.shape(x))
        out = apply(prim, (_breshape(x, (math.prod(sx[:-1]), sx[-1])), y), params)
        return _breshape(out, sx[:-1] + (np.shape(y)[-1],))
    if not bx and nx == 2 and ny == 1:
        return apply(prim, (y, transpose(x, (1, 0))), params)      # (B, k) @ x^T: one GEMM
    # examples that are vectors become rows / columns, so the batch axis is never read as one
    row, col = bx and nx == 1, by and ny == 1
    if row:
        x = _breshape(x, (size, 1) + tuple(np.shape(x)[1:]))
    if col:
        y = _breshape(y, tuple(np.shape(y)) + (1,))
    nd = max(2 if row else nx, 2 if col else ny)
    out = apply(prim, (lift(x, nd, size) if bx else x, lift(y, nd, size) if by else y), params)
    if col:
        out = _drop(out, -1)
    if row:
        out = _drop(out, -1 if ny == 1 else -2)
    return out


def _batch_linear(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    x, w, b = xs
    bx, bw, bb = batched
    nx = example_ndim(x, bx)
    if not bw and not bb:
        return apply(prim, xs, params)             # the batch is one more leading axis of x
    if not bw and bx:
        return apply(prim, (x, w, lift(b, nx, size)), params)
    n_in = np.shape(w)[-1]
    lead = tuple(np.shape(x)[1:-1] if bx else np.shape(x)[:-1])
    if bw:       # per-example weights (B, out, in): a batched GEMM of x's rows against w^T
        rows = _breshape(x, (size, math.prod(lead), n_in) if bx else (math.prod(lead), n_in))
        out = apply(MATMUL, (rows, transpose(w, (0, 2, 1))))
        out = _breshape(out, (size,) + lead + (np.shape(w)[-2],))
    else:
        out = apply(MATMUL, (x, transpose(w, (1, 0))))
    return add(out, lift(b, nx, size) if bb else b)


def _batch_einsum(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    spec = params["spec"]
    ins, out = spec.split("->")
    c = next(c for c in string.ascii_letters if c not in spec)
    labels = [c + lab if b else lab for lab, b in zip(ins.split(","), batched)]
    return apply(prim, xs, {"spec": ",".join(labels) + "->" + c + out})


def _fold_solve(solve_fn: Any, a: Any, b: Any, vec: bool, size: int) -> Any:
    """``solve_fn(a, rhs)`` for one shared matrix ``a`` (n, n) and a batch ``b`` of right-hand sides,
    (B, n) or (B, n, k): the batch joins the columns, so ``a`` is factored once."""
    n = np.shape(b)[1]
    if vec:
        return transpose(solve_fn(a, transpose(b, (1, 0))), (1, 0))
    k = np.shape(b)[2]
    cols = _breshape(transpose(b, (1, 0, 2)), (n, size * k))
    return transpose(_breshape(solve_fn(a, cols), (n, size, k)), (1, 0, 2))


def _batch_solve_like(prim: Any, xs: tuple, batched: tuple, params: dict, size: int, vec: bool) -> Any:
    """solve-like ops ``(a (..., n, n), b (n,) or (..., n, k))``: a vector example is a column."""
    a, b = xs
    ba, bb = batched
    na, nb = example_ndim(a, ba), example_ndim(b, bb)
    if not ba and na == 2 and nb <= 2:
        return _fold_solve(lambda m, r: apply(prim, (m, r), params), a, b, vec, size)
    if vec:
        b = _breshape(b, tuple(np.shape(b)) + (1,))
        nb = 2
    nd = max(na, nb)
    out = apply(prim, (lift(a, nd, size) if ba else a, lift(b, nd, size) if bb else b), params)
    return _drop(out, -1) if vec else out


def _batch_solve(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    return _batch_solve_like(prim, xs, batched, params, size, example_ndim(xs[1], batched[1]) == 1)


def _per_batch(fn: Any, x: Any) -> Any:
    """``fn`` (a NumPy function mapping over leading axes, no gradient) applied to ``x``, batched
    ``x`` included: ``fn`` of its whole batch, batched again."""
    return batched_like(fn(whole_batch(x)), x)


set_batch(MATMUL, _batch_matmul)
set_batch(LINEAR, _batch_linear)
set_batch(EINSUM, _batch_einsum)
set_batch(SOLVE, _batch_solve)
for _prim in (INV, DET, LOGDET, CHOLESKY):
    set_batch(_prim, batch_unary)


# ----- public functions -----
def _shape(x: Any) -> tuple:
    return x.shape if isinstance(x, (Tensor, np.ndarray)) else np.shape(x)


def _dtype(x: Any) -> Any:
    return x.dtype if isinstance(x, (Tensor, np.ndarray)) else np.asarray(x).dtype


def matmul(x: Any, y: Any) -> Any:
    """Matrix product with NumPy's rules (1-D operands, batch broadcasting).

    >>> import chainrule as cr
    >>> cr.matmul(cr.tensor([[1.0, 2.0]]), cr.tensor([[3.0], [4.0]]))
    tensor([[11.]])
    """
    sx, sy = _shape(x), _shape(y)
    if not sx or not sy:
        raise ShapeError(f"matmul: inputs must have at least one dimension, got shapes {sx} and {sy}; "
                         f"use multiply for scalars")
    kx = sx[-1]
    ky = sy[-2] if len(sy) > 1 else sy[0]
    if kx != ky:
        raise ShapeError(f"matmul: shapes {sx} and {sy} are not aligned: {kx} != {ky} "
                         f"(the last axis of the first must match the "
                         f"{'second-to-last' if len(sy) > 1 else 'only'} axis of the second)")
    return apply(MATMUL, (x, y))


def _explicit_spec(spec: str, shapes: list) -> str:
    """Write an einsum spec with '->' and without '...' (ellipsis expanded to fresh letters)."""
    spec = spec.replace(" ", "")
    ins = spec.split("->")[0].split(",")
    if len(ins) != len(shapes):
        raise ShapeError(f"einsum: spec {spec!r} names {len(ins)} operands but {len(shapes)} were given")
    if "..." in spec:
        fresh = [c for c in string.ascii_letters if c not in spec]
        n_ell = max(len(s) - (len(lab) - 3) for lab, s in zip(ins, shapes) if "..." in lab)
        ell = "".join(fresh[:n_ell])
        ins = [lab.replace("...", ell[n_ell - (len(s) - (len(lab) - 3)):]) if "..." in lab else lab
               for lab, s in zip(ins, shapes)]
        if "->" in spec:
            out = spec.split("->")[1].replace("...", ell)
        else:
            out = ell + "".join(sorted(c for c in set("".join(ins)) - set(ell)
                                       if "".join(ins).count(c) == 1))
    elif "->" in spec:
        out = spec.split("->")[1]
    else:
        joined = "".join(ins)
        out = "".join(sorted(c for c in set(joined) if joined.count(c) == 1))
    return ",".join(ins) + "->" + out


_SUBLIST_LETTERS = string.ascii_uppercase + string.ascii_lowercase    # NumPy's: 0 -> 'A', 26 -> 'a'


def _sublist_spec(args: tuple) -> tuple:
    """NumPy's sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as a spec string and operands."""
    def labels(sub: Any) -> str:
        out = ""
        for k in sub:
            if k is Ellipsis:
                out += "..."
            elif isinstance(k, (int, np.integer)) and 0 <= k < 52:
                out += _SUBLIST_LETTERS[int(k)]
            else:
                raise ValueError(f"einsum: subscripts in the sublist form must be integers in [0, 52) or "
                                 f"Ellipsis, got {k!r}")
        return out
    operands, subs = list(args[0::2]), list(args[1::2])
    out = labels(operands.pop()) if len(args) % 2 else None     # an odd count ends with the output sublist
    if len(subs) != len(operands):
        raise ValueError("einsum: the sublist form needs one subscript list per operand")
    spec = ",".join(labels(sub) for sub in subs) + ("" if out is None else "->" + out)
    return spec, operands


def einsum(*operands: Any, out: Any = None, optimize: Any = False, dtype: Any = None, order: str = "K",
           casting: str = "safe") -> Any:
    """Einstein summation (``numpy.einsum``: a spec string or the sublist form); every operand gets a
    gradient. ``optimize`` and ``order`` are accepted (the contraction order is chainrule's choice);
    ``dtype`` casts the operands (within ``casting``).

    >>> import chainrule as cr
    >>> cr.einsum("ij,j->i", cr.tensor([[1.0, 2.0]]), cr.tensor([3.0, 4.0]))
    tensor([11.])
    >>> cr.einsum(cr.tensor([[1.0, 2.0]]), [0, 1], cr.tensor([3.0, 4.0]), [1], [0])
    tensor([11.])
    """
    no_out("einsum", out)
    if not operands:
        raise ValueError("einsum: no subscripts given")
    if isinstance(operands[0], str):
        spec, operands = operands[0], operands[1:]
    else:
        spec, operands = _sublist_spec(operands)
    if dtype is not None:
        target = np.dtype(dtype)
        cast = []
        for x in operands:
            d = _dtype(x)
            if not np.can_cast(d, target, casting):
                raise TypeError(f"einsum: cannot cast an operand of dtype {d} to {target} under casting={casting!r}")
            cast.append(x if d == target else astype(x, target))
        operands = tuple(cast)
    spec = _explicit_spec(spec, [np.shape(raw(x)) for x in operands])
    return apply(EINSUM, tuple(operands), {"spec": spec})


def dot(x: Any, y: Any) -> Any:
    """``numpy.dot`` (composite): products of scalars, inner products, matrix products."""
    nx, ny = np.ndim(raw(x)), np.ndim(raw(y))
    if nx == 0 or ny == 0:
        return x * y
    if ny <= 2:
        return matmul(x, y)
    return tensordot(x, y, axes=([-1], [-2]))


def vdot(x: Any, y: Any) -> Any:
    """Dot product of flattened inputs, the first conjugated (as ``numpy.vdot``; composite)."""
    x = ravel(x)
    return sum((conj(x) if _dtype(x).kind == "c" else x) * ravel(y))


def inner(x: Any, y: Any) -> Any:
    """Inner product over the last axes (composite)."""
    if np.ndim(raw(x)) == 0 or np.ndim(raw(y)) == 0:
        return x * y
    return tensordot(x, y, axes=([-1], [-1]))


def outer(x: Any, y: Any) -> Any:
    """Outer product of flattened inputs (composite)."""
    return expand_dims(ravel(x), -1) * expand_dims(ravel(y), 0)


def tensordot(x: Any, y: Any, axes: Any = 2) -> Any:
    """``numpy.tensordot`` (composite of einsum)."""
    nx, ny = np.ndim(raw(x)), np.ndim(raw(y))
    if isinstance(axes, (int, np.integer)):
        ax = list(range(nx - axes, nx))
        ay = list(range(axes))
    else:
        ax, ay = ([a] if isinstance(a, int) else list(a) for a in axes)
    ax = [a % nx for a in ax]
    ay = [a % ny for a in ay]
    letters = iter(string.ascii_letters)
    lx = [next(letters) for _ in range(nx)]
    ly = [next(letters) for _ in range(ny)]
    for a, b in zip(ax, ay):
        ly[b] = lx[a]
    out = [c for i, c in enumerate(lx) if i not in ax] + [c for i, c in enumerate(ly) if i not in ay]
    return einsum(f"{''.join(lx)},{''.join(ly)}->{''.join(out)}", x, y)


def matrix_transpose(x: Any, /) -> Any:
    """Swap the last two axes (a view), as ``numpy.matrix_transpose`` and ``numpy.linalg.matrix_transpose``.

    >>> import chainrule as cr, numpy as np
    >>> cr.matrix_transpose(np.ones((2, 3, 4))).shape
    (2, 4, 3)
    """
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"matrix_transpose: the input must be at least 2-dimensional, got shape {tuple(s)}")
    return swapaxes(x, -1, -2)


def inv(x: Any) -> Any:
    """Matrix inverse (batched)."""
    return apply(INV, (x,))


def solve(a: Any, b: Any) -> Any:
    """Solve ``a @ out = b`` (batched; ``b`` of shape (..., n) or (..., n, k))."""
    return apply(SOLVE, (a, b))


def det(x: Any) -> Any:
    """Determinant (batched); its gradient, the cofactor matrix, is exact at singular matrices too.

    >>> import chainrule as cr
    >>> x = cr.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    >>> cr.linalg.det(x).backward(); x.grad
    tensor([[ 4., -2.],
            [-2.,  1.]])
    """
    return apply(DET, (x,))


class SlogdetResult(NamedTuple):
    """``(sign, logabsdet)``, with NumPy's field names."""
    sign: Any
    logabsdet: Any


def slogdet(x: Any) -> SlogdetResult:
    """(sign, log|det|) as ``numpy.linalg.slogdet``, for real and complex input (batched). Real input:
    the sign has no gradient, log|det| has inv(x)^T (a clear error at a singular x, where log|det| =
    -inf). Complex input: the sign is the phase det/|det| and, as in PyTorch, both results are
    differentiable (through log det = log|det| + i arg det).

    >>> import chainrule as cr
    >>> cr.linalg.slogdet(cr.tensor([[2.0, 0.0], [0.0, 3.0]])).logabsdet  # doctest: +ELLIPSIS
    tensor(1.79...)
    >>> cr.linalg.slogdet(cr.tensor([[2j, 0.0], [0.0, 3.0]])).sign
    tensor(0.+1.j)
    """
    s = _shape(x)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ShapeError(f"slogdet: needs square matrices (..., n, n), got shape {tuple(s)}")
    ld = apply(LOGDET, (x,))
    sign = _per_batch(lambda v: np.linalg.slogdet(v)[0], x)       # NumPy's exactly
    if _dtype(ld).kind != "c":
        return SlogdetResult(_wrap(sign) if isinstance(x, Tensor) and not x._level else sign, ld)
    logabsdet = real(ld)
    if not isinstance(ld, Tensor):
        return SlogdetResult(sign, logabsdet)
    arg = imag(ld)             # the sign's derivative: i sign d(arg det)
    return SlogdetResult(sign * exp(1j * (arg - (arg.detach() if arg._level else raw(arg)))), logabsdet)


def cholesky(x: Any, /, *, upper: bool = False) -> Any:
    """Cholesky factor of a symmetric (Hermitian) positive-definite matrix (batched), as
    ``numpy.linalg.cholesky`` and ``torch.linalg.cholesky``: lower L with x = L L^H, or upper
    U = L^H with ``upper=True``. The gradient is PyTorch's: x is taken to be Hermitian, so the
    gradient is Hermitian.

    >>> import chainrule as cr
    >>> cr.linalg.cholesky(cr.tensor([[4.0, 2 + 2j], [2 - 2j, 6.0]]))
    tensor([[2.+0.j, 0.+0.j],
            [1.-1.j, 2.+0.j]])
    """
    return apply(CHOLESKY, (x,), {"upper": bool(upper)})
