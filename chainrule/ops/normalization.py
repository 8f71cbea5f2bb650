"""Training-mode batch normalisation as one primitive, ``batch_norm_train(x, w, b; eps)``, and
layer normalisation's core, ``layer_norm(x; axes, eps)`` with its VJP ``layer_norm_backward``.

For ``x`` (N, C, *S) with M = N * prod(S) values per channel, mean ``mu`` and biased variance ``var``
over them, ``invstd = 1 / sqrt(var + eps)`` and ``xhat = (x - mu) * invstd``::

    y  = w * xhat + b                                           (w, b per channel, axis 1)
    dx = w * invstd * (g - mean(g) - xhat * mean(g * xhat))     (the closed form: one node, not ~20)
    dw = sum(g * xhat),   db = sum(g)

A plain backward computes all three at once on ndarrays (the three rules share it, the bias's sum
included); with ``create_graph`` (Tensors) the rules are compositions of chainrule ops, so they
differentiate to any order. The JVP is the linearisation
``w * invstd * (t - mean(t) - xhat * mean(t * xhat)) + t_w * xhat + t_b``.

The kernels work in blocks of examples (about 256 KiB): after a pass for the mean, each block is
centred into a small scratch array and used while it is in cache (the variance; in the backward also
the sums of g and g * (x - mean) in the same pass, then one pass for dx), so the centred input never
goes out to memory. The backward recomputes the statistics from the saved input; the forward's are
handed once to the running-statistics update, which
``nn.functional.batch_norm`` does outside the graph (``batch_norm_stats``). Sums accumulate over the
batch in float64, as PyTorch's CPU kernels; 16-bit inputs are computed in float32 and rounded once.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any

from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import LOW_PRECISION, accum_dtype
from chainrule.core._registry import apply, defprim, real_only
from chainrule.core.errors import ShapeError
from chainrule.core.tensor import Tensor
from chainrule.ops._batching import batch_axes, expand, reshape, set_batch, transpose
from chainrule.ops.conv import _scratch
from chainrule.ops.elementwise import sqrt
from chainrule.ops.nn import _shared
from chainrule.ops.reduction import mean, sum
from chainrule.ops.shape import broadcast_to

__all__ = ["batch_norm_stats", "batch_norm_train", "layer_norm", "layer_norm_backward"]

_HINT = ("x is (N, C, *S) with N * prod(S) > 1, weight and bias (C,) or numbers (1.0 and 0.0: no affine); "
         "use cr.nn.functional.batch_norm")


def _check(x: Any, w: Any, b: Any) -> None:
    if x.ndim < 2 or np.shape(w) not in ((), x.shape[1:2]) or np.shape(b) not in ((), x.shape[1:2]):
        raise ShapeError(f"batch_norm_train: input {x.shape}, weight {np.shape(w)} and bias {np.shape(b)} do "
                         f"not match: {_HINT}")


def _rows(a: Any) -> Any:
    """(N, C, *S) -> (N, C, prod(S)): one layout for any number of spatial axes (a view when
    contiguous), whose sums along the last axis are NumPy's pairwise ones."""
    return a.reshape(a.shape[0], a.shape[1], -1)


# ----- the batch's statistics -----
_SLOT = "batch_norm"      # a block of the centred input: a temporary, in conv's per-thread scratch arrays
_BLOCK_BYTES = 1 << 18    # examples per block: the centred block stays in cache between its uses


def _over_n(rows: Any) -> Any:
    """Per channel: the sum over N of per-(example, channel) sums (N, C), in float64 (PyTorch's CPU
    kernels accumulate float32 in double; longdouble stays)."""
    return np.add.reduce(rows, axis=0, dtype=np.float64 if rows.dtype.itemsize <= 8 else rows.dtype)


def _blocks(v: Any) -> tuple:
    """Slices of axis 0 of ``v`` (N, C, L), about ``_BLOCK_BYTES`` each (at least one example), and a
    scratch array for one block."""
    k = max(1, _BLOCK_BYTES // max(1, v[:1].nbytes))
    n = v.shape[0]
    return [slice(i, min(i + k, n)) for i in range(0, n, k)], _scratch(_SLOT, (k,) + v.shape[1:], v.dtype)


def _centred(v: Any, g: Any = None) -> tuple:
    """One pass over the blocks of ``v`` (N, C, L) after one for its mean ``mu``: each block centred
    in cache, the rows (N, C) of sum((v - mu)**2) and, for a cotangent ``g``, of sum(g) and
    sum(g * (v - mu)), each row summed pairwise in v's dtype. Returns (count, mu (float64), mu in v's
    dtype (C, 1), the three row arrays)."""
    count = v.shape[0] * v.shape[2]
    mu = _over_n(np.add.reduce(v, axis=2)) / count
    muc = mu.astype(v.dtype)[:, None]
    blocks, tmp = _blocks(v)
    sq = np.empty(v.shape[:2], v.dtype)
    gs, gd = (None, None) if g is None else (np.empty_like(sq), np.empty_like(sq))
    for at in blocks:
        d = np.subtract(v[at], muc, out=tmp[:at.stop - at.start])
        np.einsum("ncl,ncl->nc", d, d, out=sq[at])
        if g is not None:
            np.add.reduce(g[at], axis=2, out=gs[at])
            np.einsum("ncl,ncl->nc", g[at], d, out=gd[at])
    return count, mu, muc, sq, gs, gd


def _stats(x: Any, eps: float) -> tuple:
    """(mean, var, invstd) per channel of the ndarray ``x`` (N, C, *S) in float64 (wider for
    longdouble), and x as (N, C, prod(S)) in its accumulation dtype. Two passes, as PyTorch (no
    sum-of-squares cancellation)."""
    if x.dtype in LOW_PRECISION:
        x = x.astype(accum_dtype(x.dtype))
    v = _rows(x)
    count, mu, _, sq, _, _ = _centred(v)
    var = _over_n(sq) / count
    return mu, var, 1 / np.sqrt(var + eps), v


# the last forward's statistics, for the running update right after it (one slot, taken once: an
# input changed in place later, as gradcheck's perturbations do, never meets stale values)
_LAST = threading.local()


def batch_norm_stats(x: Any, eps: float) -> tuple:
    """The batch mean and biased variance per channel that ``batch_norm_train`` normalised ``x``
    with (ndarrays, outside any graph): what the running statistics are updated from.

    >>> import chainrule as cr
    >>> x = cr.tensor([[1.0], [3.0]])
    >>> _ = batch_norm_train(x, cr.ones(1), cr.zeros(1), 0.0)
    >>> [v.tolist() for v in batch_norm_stats(x, 0.0)]
    [[2.0], [1.0]]
    """
    data = x.data if hasattr(x, "data") and not isinstance(x, ndarray) else np.asarray(x)
    last, _LAST.value = getattr(_LAST, "value", None), None
    if last is not None and last[0]() is data and last[1] == eps:
        return last[2][:2]
    return _stats(data, eps)[:2]


# ----- forward and the plain backward (ndarrays) -----
def _forward(x: Any, w: Any, b: Any, eps: float) -> Any:
    real_only("batch_norm_train", x)
    _check(x, w, b)
    mu, var, invstd, v = _stats(x, eps)
    _LAST.value = (weakref.ref(x), eps, (mu, var))
    muc, scale, shift = _coef(mu, v), _coef(invstd * w, v), _coef(b, v)
    y = np.empty(v.shape, v.dtype)
    for at in _blocks(v)[0]:                      # from the centred input: exact for a large mean too
        out = np.subtract(v[at], muc, out=y[at])
        out *= scale
        out += shift
    return y.reshape(x.shape).astype(x.dtype, copy=False)       # (16-bit: rounded once)


def _coef(c: Any, like: Any) -> Any:
    """A per-channel coefficient (or a number), in ``like``'s dtype (an operation in float64 would cast
    every element), as (C, 1)."""
    c = np.asarray(c, like.dtype)
    return c[:, None] if c.ndim else c


def _plain_grads(g: Any, x: Any, x_again: Any, w: Any, b: Any, eps: float) -> tuple:
    """(dx, dw, db) on ndarrays: the mean again (one pass over x), then one blocked pass for the
    variance and the two reductions of g, one for dx (each block centred again, in cache)."""
    v = _rows(x.astype(accum_dtype(x.dtype)) if x.dtype in LOW_PRECISION else x)
    gv = _rows(g.astype(v.dtype, copy=False))
    count, _, muc, sq, gs, gd = _centred(v, gv)
    invstd = 1 / np.sqrt(_over_n(sq) / count + eps)
    db, gd = _over_n(gs), _over_n(gd)
    k = invstd * w
    c1, c0, kc = _coef(-k * invstd * invstd * gd / count, v), _coef(-k * db / count, v), _coef(k, v)
    blocks, tmp = _blocks(v)
    dx = np.empty(v.shape, v.dtype)
    for at in blocks:                             # dx = (x - mu) * c1 + c0 + g * k
        out = np.subtract(v[at], muc, out=dx[at])
        out *= c1
        out += c0
        out += np.multiply(gv[at], kc, out=tmp[:out.shape[0]])
    return dx.reshape(x.shape), gd * invstd, db            # (the engine casts them to the inputs' dtypes)


def _plain(g: Any, x: Any, w: Any, b: Any) -> bool:
    return type(g) is ndarray and type(x) is ndarray and not isinstance(w, Tensor)


# ----- the rules on Tensors (create_graph, forward mode): chainrule ops, differentiable again -----
def _axes(x: Any) -> tuple:
    return (0,) + tuple(range(2, len(np.shape(x))))


def _per_channel(v: Any, x: Any) -> Any:
    return reshape(v, (1, -1) + (1,) * (len(np.shape(x)) - 2))


def _xhat(x: Any, eps: float) -> tuple:
    axes = _axes(x)
    centered = x - mean(x, axis=axes, keepdims=True)
    invstd = 1 / sqrt(mean(centered * centered, axis=axes, keepdims=True) + eps)
    return centered * invstd, invstd


def _dx(g: Any, out: Any, x: Any, w: Any, b: Any, eps: float) -> Any:
    if _plain(g, x, w, b):
        return _shared(_plain_grads, g, x, (x, w, b), {"eps": eps})[0]
    axes = _axes(x)
    xhat, invstd = _xhat(x, eps)
    gw = g * _per_channel(w, x)
    return invstd * (gw - mean(gw, axis=axes, keepdims=True) - xhat * mean(gw * xhat, axis=axes, keepdims=True))


def _dw(g: Any, out: Any, x: Any, w: Any, b: Any, eps: float) -> Any:
    if _plain(g, x, w, b):
        return _shared(_plain_grads, g, x, (x, w, b), {"eps": eps})[1]
    return sum(g * _xhat(x, eps)[0], axis=_axes(x))


def _db(g: Any, out: Any, x: Any, w: Any, b: Any, eps: float) -> Any:
    if _plain(g, x, w, b):                       # (x is None when only the bias needs a gradient)
        return _shared(_plain_grads, g, x, (x, w, b), {"eps": eps})[2]
    return sum(g, axis=_axes(g))


def _jvp_x(t: Any, out: Any, x: Any, w: Any, b: Any, eps: float) -> Any:
    axes = _axes(x)
    xhat, invstd = _xhat(x, eps)
    return _per_channel(w, x) * invstd * (t - mean(t, axis=axes, keepdims=True)
                                          - xhat * mean(t * xhat, axis=axes, keepdims=True))


def _jvp_w(t: Any, out: Any, x: Any, w: Any, b: Any, eps: float) -> Any:
    return _per_channel(t, x) * _xhat(x, eps)[0]


def _jvp_b(t: Any, out: Any, x: Any, w: Any, b: Any, eps: float) -> Any:
    return broadcast_to(_per_channel(t, x), np.shape(x))


def _flops(out: Any, x: Any, w: Any, b: Any, eps: float) -> int:
    return 7 * int(np.size(out))        # mean, centre, square-sum, scale, shift


BATCH_NORM_TRAIN = defprim(
    "batch_norm_train", _forward, vjps=(_dx, _dw, _db), jvps=(_jvp_x, _jvp_w, _jvp_b), saves="x y",
    needs={0: (0, 1), 1: (0, 1), 2: ()}, flops=_flops, kind="softmax", accumulate=True, autocast="float32",
    hint=_HINT)


def _batch_bn(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    """vmap: each example's channels are channels of their own, (B, N, C, *S) -> (N, B * C, *S)."""
    x, w, b = (v if bt or not np.ndim(v) else expand(v, size) for v, bt in zip(xs, batched))
    s = tuple(np.shape(x))
    rest = tuple(range(3, len(s)))
    flat = reshape(transpose(x, (1, 0, 2) + rest), (s[1], size * s[2]) + s[3:])
    w, b = (reshape(v, (size * s[2],)) if np.ndim(v) else v for v in (w, b))
    out = apply(prim, (flat, w, b), params)
    return transpose(reshape(out, (s[1], size, s[2]) + s[3:]), (1, 0, 2) + rest)


set_batch(BATCH_NORM_TRAIN, _batch_bn)


def batch_norm_train(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` with the batch's per-channel mean and biased
    variance over every axis but 1 of ``x`` (N, C, *S): training-mode batch norm as one node.
    ``weight`` and ``bias`` are (C,) or numbers (1.0 and 0.0 for none).

    >>> import chainrule as cr
    >>> batch_norm_train(cr.tensor([[1.0], [3.0]]), cr.ones(1), cr.zeros(1), 0.0)
    tensor([[-1.],
            [ 1.]])
    """
    return apply(BATCH_NORM_TRAIN, (x, weight, bias), {"eps": float(eps)})


# ----- layer normalisation over trailing axes: one node each way -----
# xhat = (x - mean) * rstd over ``axes`` (negative: the last axes), rstd = 1 / sqrt(var + eps), with
# the biased variance. Its Jacobian J = rstd (I - 1 1^T / N - xhat xhat^T / N) is symmetric, so one
# rule serves both modes: J t, the primitive ``layer_norm_backward(t, x)``. A plain backward and a
# recorded one (create_graph, cr.compile's capture) run the same NumPy kernel, so they agree bit for
# bit and a compiled step replays what eager execution computes. Its own rules (second order and up)
# are chainrule ops. The affine part (weight, bias) stays two ops in ``nn.functional.layer_norm``.
def _ln_centred(x: Any, axes: tuple, eps: float) -> tuple:
    """(x - mean, rstd) over ``axes``, on ndarrays."""
    xc = x - np.mean(x, axis=axes, keepdims=True)
    rstd = np.mean(np.square(xc), axis=axes, keepdims=True)
    rstd += eps
    np.sqrt(rstd, out=rstd)
    return xc, np.reciprocal(rstd, out=rstd)


def _ln_forward(x: Any, axes: tuple, eps: float) -> Any:
    real_only("layer_norm", x)
    v = x.astype(accum_dtype(x.dtype)) if x.dtype in LOW_PRECISION else x     # 16-bit: in float32
    xc, rstd = _ln_centred(v, axes, eps)
    xc *= rstd
    return xc.astype(x.dtype, copy=False)                                       # (rounded once)


def _ln_backward_forward(g: Any, x: Any, axes: tuple, eps: float) -> Any:
    """``J(x) g = rstd (g - mean(g) - xhat mean(g xhat))`` on ndarrays."""
    real_only("layer_norm_backward", x)
    g = np.asarray(g)
    dtype = np.result_type(g, x)
    if dtype in LOW_PRECISION:                                                  # 16-bit: in float32
        g, x = g.astype(accum_dtype(dtype)), x.astype(accum_dtype(dtype))
    xhat, rstd = _ln_centred(x, axes, eps)
    xhat *= rstd
    dx = g - np.mean(g, axis=axes, keepdims=True)
    dx -= xhat * np.mean(g * xhat, axis=axes, keepdims=True)
    dx *= rstd
    return dx.astype(dtype, copy=False)                                         # (rounded once)


def _ln_rule(g: Any, out: Any, x: Any, axes: tuple, eps: float) -> Any:
    if type(g) is ndarray and type(x) is ndarray:          # a plain backward: the kernel, inline
        return _ln_backward_forward(g, x, axes, eps)
    return apply(LAYER_NORM_BACKWARD, (g, x), {"axes": axes, "eps": eps})


def _ln_ops(x: Any, axes: tuple, eps: float) -> tuple:
    """(xhat, rstd, N) in chainrule ops (the second-order rules: differentiable again)."""
    centred = x - mean(x, axis=axes, keepdims=True)
    rstd = 1 / sqrt(mean(centred * centred, axis=axes, keepdims=True) + eps)
    n = int(np.prod([np.shape(x)[a] for a in axes]))
    return centred * rstd, rstd, n


def _ln_backward_vjp_x(ct: Any, out: Any, g: Any, x: Any, axes: tuple, eps: float) -> Any:
    """d<ct, J(x) g>/dx = -(rstd^2 xhat / N)(A - Sg Su / N) - (rstd / N) J(Sg ct + Su g), with
    A = sum(ct (g - mean(g))), Su = sum(ct xhat), Sg = sum(g xhat) over the axes."""
    xhat, rstd, n = _ln_ops(x, axes, eps)
    su, sg = sum(ct * xhat, axis=axes, keepdims=True), sum(g * xhat, axis=axes, keepdims=True)
    a = sum(ct * (g - mean(g, axis=axes, keepdims=True)), axis=axes, keepdims=True)
    return (-(rstd * rstd / n) * xhat * (a - sg * su / n)
            - (rstd / n) * _ln_rule(sg * ct + su * g, None, x, axes, eps))


def _ln_backward_jvp_x(t: Any, out: Any, g: Any, x: Any, axes: tuple, eps: float) -> Any:
    """d(J(x) g) along t: -rstd mean(xhat t) J g - rstd (J t mean(g xhat) + xhat mean(g J t))."""
    xhat, rstd, _ = _ln_ops(x, axes, eps)
    dxhat = _ln_rule(t, None, x, axes, eps)
    return -rstd * (mean(xhat * t, axis=axes, keepdims=True) * out
                    + dxhat * mean(g * xhat, axis=axes, keepdims=True)
                    + xhat * mean(g * dxhat, axis=axes, keepdims=True))


LAYER_NORM_BACKWARD = defprim(
    "layer_norm_backward", _ln_backward_forward,
    vjps=(lambda ct, out, g, x, axes, eps: _ln_rule(ct, None, x, axes, eps), _ln_backward_vjp_x),
    jvps=(lambda t, out, g, x, axes, eps: _ln_rule(t, None, x, axes, eps), _ln_backward_jvp_x),
    saves="x y", needs={0: (1,), 1: (0, 1)}, flops=lambda out, g, x, axes, eps: 12 * int(np.size(out)),
    kind="softmax", accumulate=True, autocast="float32")
LAYER_NORM = defprim("layer_norm", _ln_forward, rules=(_ln_rule,), saves="x",
                     flops=lambda out, x, axes, eps: 5 * int(np.size(out)), kind="softmax",
                     accumulate=True, autocast="float32")
set_batch(LAYER_NORM, batch_axes())                # the axes are negative: past the batch axis as they are
set_batch(LAYER_NORM_BACKWARD, batch_axes())


def _trailing(axes: Any, who: str) -> tuple:
    axes = tuple(int(a) for a in (axes if isinstance(axes, (tuple, list)) else (axes,)))
    if not axes or sorted(axes) != list(range(-len(axes), 0)):
        raise ShapeError(f"{who}: axes must be the last k axes as negative numbers, e.g. (-1,) or (-2, -1); "
                         f"got {axes}")
    return axes


def layer_norm(x: Any, axes: Any = (-1,), eps: float = 1e-5) -> Any:
    """``(x - mean) / sqrt(var + eps)`` over the trailing ``axes`` (biased variance) as one node:
    the core of ``cr.nn.functional.layer_norm`` (which adds the affine part).

    >>> import chainrule as cr
    >>> layer_norm(cr.tensor([[1.0, 3.0]]), eps=0.0)
    tensor([[-1.,  1.]])
    """
    return apply(LAYER_NORM, (x,), {"axes": _trailing(axes, "layer_norm"), "eps": float(eps)})


def layer_norm_backward(g: Any, x: Any, axes: Any = (-1,), eps: float = 1e-5) -> Any:
    """``g`` pulled back (or pushed forward: the Jacobian is symmetric) through ``layer_norm`` at ``x``.

    >>> import numpy as np
    >>> layer_norm_backward(np.array([1.0, 0.0]), np.array([1.0, 3.0]), eps=0.0)
    array([0., 0.])
    """
    return _ln_rule(g, None, x, _trailing(axes, "layer_norm_backward"), float(eps))
