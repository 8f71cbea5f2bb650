"""Neural-network primitives kept as primitives for stability (softmax, log_softmax) or speed (the fused
softmax cross-entropy; the recurrences of LSTM, GRU and RNN: lstm_scan, gru_scan, rnn_scan).

relu, sigmoid, softplus and gelu are elementwise primitives (see elementwise.py). On 16-bit and FP8
inputs these ops run in float32 and round once (``_dtypes.accumulate``), as PyTorch's kernels do.
"""
from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from chainrule.core._backend import ndarray, np
from chainrule.core._dtypes import LOW_PRECISION, accumulate
from chainrule.core._registry import apply, defprim, raw, real_only
from chainrule.core.errors import ShapeError
from chainrule.core.grad_mode import STATE
from chainrule.core.tensor import Tensor
from chainrule.ops._batching import Batch, batch_axes, expand, set_batch
from chainrule.ops._batching import reshape as _breshape
from chainrule.ops.elementwise import exp, tanh, zeros_like
from chainrule.ops.reduction import _along, sum
from chainrule.ops.shape import concatenate, expand_dims, stack, swapaxes


def _shifted(x: Any, axis: int) -> Any:
    try:
        return x - np.maximum.reduce(x, axis=axis, keepdims=True)
    except ValueError:                  # no elements, no maximum: the results are empty (PyTorch's)
        return x


def _softmax_forward(x: Any, axis: int) -> Any:
    z = np.exp(_shifted(x, axis))
    return z / np.add.reduce(z, axis=axis, keepdims=True)


def _log_softmax_forward(x: Any, axis: int) -> Any:
    shifted = _shifted(x, axis)
    if not x.size:                      # nothing to normalise (and the log of an empty sum warns)
        return shifted
    return shifted - np.log(np.add.reduce(np.exp(shifted), axis=axis, keepdims=True))


# matches torch.nn.functional.softmax / log_softmax; softmax's Jacobian diag(p) - p p^T is
# symmetric, so one rule serves both modes
SOFTMAX = defprim("softmax", _softmax_forward,
                  rules=(lambda g, out, x, axis: out * (g - sum(g * out, axis=axis, keepdims=True)),),
                  saves="out", flops=lambda out, x, axis: 4 * int(np.size(out)), kind="softmax",
                  accumulate=True, autocast="float32")
LOG_SOFTMAX = defprim("log_softmax", _log_softmax_forward,
                      vjps=(lambda g, out, x, axis: g - exp(out) * sum(g, axis=axis, keepdims=True),),
                      jvps=(lambda t, out, x, axis: t - sum(exp(out) * t, axis=axis, keepdims=True),),
                      saves="out", flops=lambda out, x, axis: 4 * int(np.size(out)), kind="softmax",
                      accumulate=True, autocast="float32")


def _softmax_cross_entropy_forward(x: Any, target: Any, reduction: str = "none") -> Any:
    real_only("softmax_cross_entropy", x)
    shifted = _shifted(x, -1)
    lse = np.log(np.add.reduce(np.exp(shifted), axis=-1))
    loss = lse - shifted[np.arange(len(target)), target]
    if reduction == "none":
        return loss
    total = np.add.reduce(loss)
    return np.asarray(total / len(target) if reduction == "mean" else total, dtype=loss.dtype)


def _onehot_kernel(like: Any, target: Any) -> Any:
    out = np.zeros(like.shape, dtype=like.dtype)
    out[np.arange(len(target)), target] = 1
    return out


def _onehot(target: Any, like: Any) -> Any:
    data = raw(like)
    out = _onehot_kernel(data, target)
    if STATE.recorder is not None:      # cr.compile: a kernel of the targets, taped as one
        STATE.recorder.on_kernel(_onehot_kernel, (data, target), None, out)
    return out


def _dloss_dlogits(x: Any, target: Any) -> Any:
    return softmax(x, axis=-1) - _onehot(target, x)


def _softmax_cross_entropy_vjp(g: Any, out: Any, x: Any, target: Any, reduction: str = "none") -> Any:
    scale = g / len(target) if reduction == "mean" else g          # () or, for "none", (N,)
    if type(x) is ndarray and type(g) is ndarray:   # a plain backward: in place on a fresh softmax
        p = _softmax_forward(x, -1)
        p[np.arange(len(target)), target] -= 1
        p *= scale[..., None] if reduction == "none" else scale
        return p
    return _dloss_dlogits(x, target) * (expand_dims(scale, -1) if reduction == "none" else scale)


def _softmax_cross_entropy_jvp(t: Any, out: Any, x: Any, target: Any, reduction: str = "none") -> Any:
    per_example = sum(t * _dloss_dlogits(x, target), axis=-1)
    if reduction == "none":
        return per_example
    return sum(per_example) / len(target) if reduction == "mean" else sum(per_example)


# Fused for speed (one node instead of log_softmax, indexing, negation and the mean): cross-entropy
# of logits (N, C) against integer targets (N,), per example or reduced ("mean", "sum");
# d/dlogits = softmax - onehot.
SOFTMAX_CROSS_ENTROPY = defprim(
    "softmax_cross_entropy", _softmax_cross_entropy_forward,
    vjps=(_softmax_cross_entropy_vjp,), jvps=(_softmax_cross_entropy_jvp,),
    saves="x", flops=lambda out, x, target, reduction="none": 5 * int(np.size(x)), kind="softmax",
    accumulate=True, autocast="float32")
REDUCTIONS = ("none", "mean", "sum")


def _batched(t: Any) -> bool:
    return isinstance(t, Tensor) and bool(t._level)


def _flat_targets(t: Any, size: int) -> Any:
    """The batch's targets as one vector, (B * N,): batched ones (``Batch``) as they are, the
    others repeated for every example."""
    if isinstance(t, Batch):
        t = t.value
    elif _batched(t):                       # batched at an outer level: its ops dispatch there
        t = expand(t, size)
    else:
        t = np.broadcast_to(raw(t), (size,) + np.shape(raw(t)))
    return _breshape(t, (-1,)) if _batched(t) else np.reshape(raw(t), -1)


def _batch_cross_entropy(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    # the examples' rows stacked into one (B * N, C) problem; the reduction then per example
    x = xs[0] if batched[0] else expand(xs[0], size)
    n, c = np.shape(x)[1:]
    flat = apply(prim, (_breshape(x, (size * n, c)),), {"target": _flat_targets(params["target"], size),
                                                         "reduction": "none"})
    loss = _breshape(flat, (size, n))
    if params["reduction"] == "none":
        return loss
    total = sum(loss, axis=1)
    return total / n if params["reduction"] == "mean" else total


set_batch(SOFTMAX, batch_axes("axis"))
set_batch(LOG_SOFTMAX, batch_axes("axis"))
set_batch(SOFTMAX_CROSS_ENTROPY, _batch_cross_entropy)


def softmax_cross_entropy(logits: Any, target: Any, reduction: str = "none") -> Any:
    """Cross-entropy ``logsumexp(logits) - logits[target]`` of (N, C) logits and integer targets
    (N,), per example (``reduction="none"``) or its "mean" or "sum", computed stably as one
    primitive (``cr.nn.functional.cross_entropy``'s plain case).

    >>> import chainrule as cr
    >>> cr.numpy.softmax_cross_entropy(cr.tensor([[0.0, 0.0]]), [1])
    tensor([0.6931472])
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"softmax_cross_entropy: reduction must be 'none', 'mean' or 'sum', got "
                         f"{reduction!r}")
    if getattr(logits, "dtype", None) in LOW_PRECISION:
        return accumulate(softmax_cross_entropy, logits, target, reduction)
    target = target if _batched(target) else np.asarray(raw(target))
    return apply(SOFTMAX_CROSS_ENTROPY, (logits,), {"target": target, "reduction": reduction})


def softmax(x: Any, axis: int = -1) -> Any:
    """Softmax along ``axis`` (numerically stable).

    >>> import chainrule as cr
    >>> cr.softmax(cr.tensor([0.0, 0.0]))
    tensor([0.5, 0.5])
    """
    return _along(x, SOFTMAX, axis)


def log_softmax(x: Any, axis: int = -1) -> Any:
    """Log of the softmax along ``axis``, computed without forming the softmax.

    >>> import chainrule as cr
    >>> cr.log_softmax(cr.tensor([0.0, 0.0]))
    tensor([-0.6931472, -0.6931472])
    """
    return _along(x, LOG_SOFTMAX, axis)


# ----- the LSTM recurrence, fused (issue 28's profile: one node per layer and direction) -----
# One primitive runs a whole LSTM layer over a sequence in the packed layout (rows of time step t,
# batch_sizes[t] of them, follow those of step t - 1; a full batch is batch_sizes = (N,) * T):
#   lstm_scan(gi (S, 4n), w_hh (4n, P), h0 (N, P), c0 (N, n)[, w_hr (P, n)]) -> (S + N, P + 5n)
# gi is the input projection x @ w_ih.T + b_ih + b_hh of every step (one matmul, outside). Row r < S
# holds step r's [h | c | i f g o] (the activated gates, which the rules read back), the last N rows
# the final [h_n | c_n | 0]: a sequence's state stops at its own last step (reverse=True: runs from
# each sequence's own end down to step 0). The rules are loops over the steps written with chainrule
# ops (differentiable again); the VJP runs once per node for all inputs and returns each cotangent
# as one array, so the weight gradient is one matmul over all steps. A contraction for autocast
# (PyTorch's autocast runs its LSTM in the low dtype): 16-bit inputs are computed in float32, rounded once.
def packed_steps(batch_sizes: tuple, reverse: bool) -> list:
    """(first row, rows) of each time step of a packed batch, in the order the recurrence runs them.

    >>> packed_steps((3, 2, 1), reverse=True)
    [(5, 1), (3, 2), (0, 3)]
    """
    starts = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]).astype(int).tolist()
    steps = list(zip(starts, (int(b) for b in batch_sizes)))
    return steps[::-1] if reverse else steps


def _step_rows(steps: list, backward: bool = False) -> Iterator[tuple[int, slice, int]]:
    """(k, the rows of step k, their count) for each step, in the recurrence's order or backward."""
    for k in range(len(steps) - 1, -1, -1) if backward else range(len(steps)):
        start, bs = steps[k]
        yield k, slice(start, start + bs), bs


def _carry(new: Any, state: Any, bs: int, big_n: int) -> Any:
    """The state after a step of the first ``bs`` of ``big_n`` sequences: ``new`` there, the others' rows kept."""
    return new if bs == big_n else concatenate([new, state[bs:]], axis=0)


def _in_time_order(pieces: list, reverse: bool, *rest: Any) -> Any:
    """The steps' rows (``pieces[k]`` for step k) stacked as the output holds them, time ascending;
    then ``rest``."""
    return concatenate((pieces[::-1] if reverse else pieces) + list(rest), axis=0)


def _start_tangent(ts: dict, i: int, state: Any) -> Any:
    """The tangent of the initial state, input ``i``: zero when ``ts`` has none."""
    return ts[i] if i in ts else zeros_like(state)


def _pre_activation_tangent(ts: dict, rows: slice, dh: Any, w_hh: Any, h_prev: Any) -> Any:
    """The tangent of a step's ``gi[rows] + h_prev @ w_hh.T``, ``dh`` that of ``h_prev``."""
    dz = dh @ swapaxes(w_hh, 0, 1)
    if 0 in ts:
        dz = dz + ts[0][rows]
    if 1 in ts:
        dz = dz + h_prev @ swapaxes(ts[1], 0, 1)
    return dz


def _rounded_once(forward: Any) -> Any:
    """A recurrence's forward that computes 16-bit inputs in float32 and rounds the output once."""
    @functools.wraps(forward)
    def run(gi: Any, *xs: Any, **params: Any) -> Any:
        if gi.dtype not in LOW_PRECISION:
            return forward(gi, *xs, **params)
        wide = (None if v is None else np.asarray(v, dtype=np.float32) for v in (gi, *xs))
        return forward(*wide, **params).astype(gi.dtype)
    return run


def _prev_state(cols: Any, init: Any, steps: list, k: int) -> Any:
    """The state (h or c columns ``cols`` of the output) each row of step ``k`` starts from: the
    previous step's rows, then the initial state for rows that start here (reverse order)."""
    bs = steps[k][1]
    if k == 0:
        return init[:bs]
    start, before = steps[k - 1]
    if before >= bs:
        return cols[start:start + bs]
    return concatenate([cols[start:start + before], init[before:bs]], axis=0)


def _gate_act(z: Any, half: Any, shift: Any, out: Any) -> Any:
    """The activated gates of pre-activations z (rows, 4n), into ``out``: sigmoid on the i, f, o
    blocks, tanh on g; sigmoid as 0.5 * tanh(x / 2) + 0.5, so that one ufunc serves all four blocks
    (4-8x faster than the exp form; absolute error about an ulp of 1). ``half`` (4n,): 0.5 on the
    sigmoid blocks, 1 on g, and ``shift`` 0.5 and 0: whole rows, one call each rather than one per block."""
    z *= half
    np.tanh(z, out=out)
    out *= half
    out += shift
    return out


@_rounded_once
def _lstm_scan_forward(gi: Any, w_hh: Any, h0: Any, c0: Any, w_hr: Any = None, *, batch_sizes: tuple,
                       reverse: bool = False) -> Any:
    (s, four_n), (big_n, p) = gi.shape, h0.shape
    n = four_n // 4
    out = np.zeros((s + big_n, p + 5 * n), dtype=np.result_type(gi, w_hh, h0, c0))
    h, c = np.array(h0, dtype=out.dtype), np.array(c0, dtype=out.dtype)
    w_t = np.ascontiguousarray(w_hh.T)          # BLAS runs h @ w_t ~25 % faster than on the transposed view
    z, tmp = np.empty((big_n, four_n), dtype=out.dtype), np.empty((big_n, n), dtype=out.dtype)
    half = np.full(four_n, 0.5, dtype=out.dtype)
    half[2 * n:3 * n] = 1
    shift = 1 - half
    for start, bs in packed_steps(batch_sizes, reverse):   # in place, into the step's rows of out
        row, zk, t = out[start:start + bs], z[:bs], tmp[:bs]
        np.matmul(h[:bs], w_t, out=zk)
        zk += gi[start:start + bs]
        a = _gate_act(zk, half, shift, row[:, p + n:])
        c_new = row[:, p:p + n]
        np.multiply(a[:, n:2 * n], c[:bs], out=c_new)
        np.multiply(a[:, :n], a[:, 2 * n:3 * n], out=t)
        c_new += t
        np.tanh(c_new, out=t)
        t *= a[:, 3 * n:]
        if w_hr is None:
            row[:, :p] = t
        else:
            np.matmul(t, w_hr.T, out=row[:, :p])
        h[:bs], c[:bs] = row[:, :p], c_new
    out[s:, :p], out[s:, p:p + n] = h, c
    return out


def _gate_cotangent(pieces: list, g_a: Any, a: Any, n: int) -> Any:
    """The pre-activation cotangent of one step, ``(concat(pieces) + g_a) * act'``, from the
    activated gates ``a`` (sigmoid' = a(1 - a) on i, f, o; tanh' = 1 - a^2 on g)."""
    da = concatenate(pieces, axis=1)
    sig = a * (1 - a)
    deriv = concatenate([sig[:, :2 * n], 1 - a[:, 2 * n:3 * n] * a[:, 2 * n:3 * n], sig[:, 3 * n:]], axis=1)
    return (da + g_a) * deriv


def _lstm_grads_in_place(g: Any, out: Any, h0: Any, c0: Any, w_hh: Any, w_hr: Any, steps: list) -> tuple:
    """``_lstm_scan_grads``'s loop for a plain backward (ndarrays): the same steps in place, into
    preallocated buffers (a fifth faster). Returns (dz_all, h_prev_all, dh_all, m_all, dh0, dc0)."""
    big_n, p = h0.shape
    s, n = out.shape[0] - big_n, c0.shape[1]
    dtype = np.result_type(g, out)
    hs, cs, acts = out[:s, :p], out[:s, p:p + n], out[:s, p + n:]
    dh, dc = np.array(g[s:, :p], dtype=dtype), np.array(g[s:, p:p + n], dtype=dtype)
    dz_all, h_prev = np.empty((s, 4 * n), dtype=dtype), np.empty((s, p), dtype=dtype)
    dh_all, m_all = (None, None) if w_hr is None else (np.empty((s, p), dtype=dtype), np.empty((s, n), dtype=dtype))
    tc, t, dm, deriv = (np.empty((big_n, w), dtype=dtype) for w in (n, n, n, 4 * n))
    on_g = np.zeros(4 * n, dtype=dtype)
    on_g[2 * n:3 * n] = 1
    for k, rows, bs in _step_rows(steps, backward=True):
        a, d, tck, tk, de = acts[rows], dz_all[rows], tc[:bs], t[:bs], deriv[:bs]
        np.tanh(cs[rows], out=tck)
        dh_t, dc_t = dh[:bs], dc[:bs]
        dh_t += g[rows, :p]
        if w_hr is None:
            dmk = dh_t
        else:
            dh_all[rows] = dh_t
            np.multiply(a[:, 3 * n:], tck, out=m_all[rows])
            dmk = np.matmul(dh_t, w_hr, out=dm[:bs])
        np.multiply(tck, tck, out=tk)                  # dc_t += dm * o * (1 - tanh(c)^2) (+ g_c)
        np.subtract(1, tk, out=tk)
        tk *= a[:, 3 * n:]
        tk *= dmk
        dc_t += tk
        dc_t += g[rows, p:p + n]
        np.multiply(dc_t, a[:, 2 * n:3 * n], out=d[:, :n])
        np.multiply(dc_t, _prev_state(cs, c0, steps, k), out=d[:, n:2 * n])
        np.multiply(dc_t, a[:, :n], out=d[:, 2 * n:3 * n])
        np.multiply(dmk, tck, out=d[:, 3 * n:])
        d += g[rows, p + n:]
        np.subtract(1, a, out=de)                      # act' = (1 - a)(a + on_g): a(1 - a), 1 - a^2
        d *= de
        np.add(a, on_g, out=de)
        d *= de
        h_prev[rows] = _prev_state(hs, h0, steps, k)
        np.matmul(d, w_hh, out=dh_t)
        dc_t *= a[:, n:2 * n]
    return dz_all, h_prev, dh_all, m_all, dh, dc


def _lstm_scan_grads(g: Any, out: Any, gi: Any, w_hh: Any, h0: Any, c0: Any, w_hr: Any = None, *,
                     batch_sizes: tuple, reverse: bool = False) -> tuple:
    """The cotangents of (gi, w_hh, h0, c0, w_hr), from one backward loop over the steps."""
    (s, four_n), (big_n, p) = np.shape(raw(gi)), np.shape(raw(h0))
    n = four_n // 4
    steps = packed_steps(batch_sizes, reverse)
    if all(type(v) is ndarray for v in (g, out, h0, c0, w_hh)) and (w_hr is None or type(w_hr) is ndarray):
        dz_all, h_prev, dh_all, m_all, dh, dc = _lstm_grads_in_place(g, out, h0, c0, w_hh, w_hr, steps)
        dw_hr = None if w_hr is None else dh_all.T @ m_all
        return dz_all, dz_all.T @ h_prev, dh, dc, dw_hr
    hs, cs, acts = out[:s, :p], out[:s, p:p + n], out[:s, p + n:]
    dh, dc = g[s:, :p], g[s:, p:p + n]
    dz, dhs, ms, h_prev = [None] * len(steps), [None] * len(steps), [None] * len(steps), [None] * len(steps)
    for k, rows, bs in _step_rows(steps, backward=True):      # every step's local derivatives in the loop: cache-hot
        a = acts[rows]
        a_o, tc = a[:, 3 * n:], tanh(cs[rows])
        dh_t = g[rows, :p] + dh[:bs]
        dm = dh_t if w_hr is None else dh_t @ w_hr
        dhs[k], ms[k] = dh_t, a_o * tc if w_hr is not None else None
        dc_t = dc[:bs] + dm * a_o * (1 - tc * tc) + g[rows, p:p + n]
        dz[k] = _gate_cotangent([dc_t * a[:, 2 * n:3 * n], dc_t * _prev_state(cs, c0, steps, k), dc_t * a[:, :n],
                                 dm * tc], g[rows, p + n:], a, n)
        h_prev[k] = _prev_state(hs, h0, steps, k)
        dh_new, dc_new = dz[k] @ w_hh, dc_t * a[:, n:2 * n]
        dh = _carry(dh_new, dh, bs, big_n)
        dc = _carry(dc_new, dc, bs, big_n)
    dz_all = _in_time_order(dz, reverse)
    dw_hh = swapaxes(dz_all, 0, 1) @ _in_time_order(h_prev, reverse)
    dw_hr = None
    if w_hr is not None:
        dw_hr = swapaxes(_in_time_order(dhs, reverse), 0, 1) @ _in_time_order(ms, reverse)
    return dz_all, dw_hh, dh, dc, dw_hr


_MEMO = threading.local()


def _shared(grads: Any, g: Any, out: Any, xs: tuple, params: dict) -> tuple:
    """A recurrence node's rules share one backward loop: the first rule called computes every
    cotangent; the others (the same cotangent and output objects, in the same Node.vjp call) read
    them back. Weak references: nothing is kept once the engine drops the cotangent."""
    last = getattr(_MEMO, "last", None)
    if last is not None and last[0] is grads and last[1]() is g and last[2]() is out:
        return last[3]
    result = grads(g, out, *xs, **params)
    _MEMO.last = (grads, weakref.ref(g, _forget), weakref.ref(out), result)
    return result


def _forget(ref: Any) -> None:
    """The cotangent is gone (the node's rules have all run): drop the cotangents kept for them."""
    last = getattr(_MEMO, "last", None)
    if last is not None and last[1] is ref:
        _MEMO.last = None


def _vjp_rule(grads: Any, i: int) -> Any:
    return lambda g, out, *xs, **params: _shared(grads, g, out, xs, params)[i]


def _jvp_rule(tangent: Any, i: int) -> Any:
    return lambda t, out, *xs, **params: tangent({i: t}, out, *xs, **params)


def _batch_recurrence(prim: Any, xs: tuple, batched: tuple, params: dict, size: int) -> Any:
    # one recurrence per example (the weights may be per example too), stacked
    return stack([apply(prim, tuple(x[b] if bt else x for x, bt in zip(xs, batched)), params)
                  for b in range(size)], axis=0)


def _lstm_scan_tangent(ts: dict, out: Any, gi: Any, w_hh: Any, h0: Any, c0: Any, w_hr: Any = None, *,
                       batch_sizes: tuple, reverse: bool = False) -> Any:
    """The output's tangent for the input tangents ``ts`` ({input index: tangent}): the recurrence
    linearised, one loop over the steps."""
    (s, four_n), (big_n, p) = np.shape(raw(gi)), np.shape(raw(h0))
    n = four_n // 4
    steps = packed_steps(batch_sizes, reverse)
    hs, cs = out[:s, :p], out[:s, p:p + n]
    dh = _start_tangent(ts, 2, h0)
    dc = _start_tangent(ts, 3, c0)
    pieces = [None] * len(steps)
    for k, rows, bs in _step_rows(steps):
        a = out[rows, p + n:]
        a_i, a_f, a_g, a_o = a[:, :n], a[:, n:2 * n], a[:, 2 * n:3 * n], a[:, 3 * n:]
        tc = tanh(cs[rows])
        dz = _pre_activation_tangent(ts, rows, dh[:bs], w_hh, _prev_state(hs, h0, steps, k))
        sig = a * (1 - a)
        da = dz * concatenate([sig[:, :2 * n], 1 - a_g * a_g, sig[:, 3 * n:]], axis=1)
        dc_new = (da[:, n:2 * n] * _prev_state(cs, c0, steps, k) + a_f * dc[:bs]
                  + da[:, :n] * a_g + a_i * da[:, 2 * n:3 * n])
        dh_new = da[:, 3 * n:] * tc + a_o * (1 - tc * tc) * dc_new
        if w_hr is not None:
            dh_new = dh_new @ swapaxes(w_hr, 0, 1)
            if 4 in ts:
                dh_new = dh_new + (a_o * tc) @ swapaxes(ts[4], 0, 1)
        pieces[k] = concatenate([dh_new, dc_new, da], axis=1)
        dh = _carry(dh_new, dh, bs, big_n)
        dc = _carry(dc_new, dc, bs, big_n)
    return _in_time_order(pieces, reverse, concatenate([dh, dc, zeros_like(out[s:, p + n:])], axis=1))


def _lstm_scan_flops(out: Any, gi: Any, w_hh: Any, h0: Any, c0: Any, w_hr: Any = None, **params: Any) -> int:
    (s, four_n), p = np.shape(gi), np.shape(h0)[-1]
    n = four_n // 4
    return 2 * s * four_n * p + 12 * s * n + (2 * s * n * p if w_hr is not None else 0)


LSTM_SCAN = defprim("lstm_scan", _lstm_scan_forward,
                    vjps=tuple(_vjp_rule(_lstm_scan_grads, i) for i in range(5)),
                    jvps=tuple(_jvp_rule(_lstm_scan_tangent, i) for i in range(5)), saves="xs out",
                    flops=_lstm_scan_flops, kind="matmul", accumulate=True, autocast="low", batch=_batch_recurrence)


def _batch_sizes(batch_sizes: Any, big_n: int) -> tuple:
    if batch_sizes is None:
        return (big_n,)
    return tuple(int(b) for b in np.asarray(raw(batch_sizes)).reshape(-1).tolist())


def _fits(bs: tuple, s: int, big_n: int) -> bool:
    """batch_sizes of a packed batch of S rows and N sequences: non-increasing from N, summing to S."""
    return bool(bs) and bs[0] == big_n and sum(bs) == s and all(1 <= b <= a for a, b in zip(bs, bs[1:]))


def lstm_scan(gi: Any, w_hh: Any, h0: Any, c0: Any, w_hr: Any = None, batch_sizes: Any = None,
              reverse: bool = False) -> Any:
    """One LSTM layer's recurrence over a sequence in the packed layout, as one primitive.

    ``gi`` (S, 4n): the input projection (``x @ w_ih.T + b_ih + b_hh``) of every step, the steps'
    rows one after the other (``batch_sizes[t]`` rows for step t, non-increasing; default: one
    step of all rows); ``w_hh`` (4n, P), ``h0`` (N, P), ``c0`` (N, n), ``w_hr`` (P, n) or None.
    Returns (S + N, P + 5n): per row ``[h | c | i f g o]``, then the final ``[h_n | c_n | 0]``.

    >>> import numpy as np
    >>> from chainrule.ops.nn import lstm_scan
    >>> out = lstm_scan(np.zeros((6, 8)), np.zeros((8, 2)), np.zeros((3, 2)), np.ones((3, 2)),
    ...                 batch_sizes=(3, 2, 1))
    >>> out.shape, float(out[0, 2])                    # c = f * c0 + i * g = 0.5 * 1 + 0.5 * 0
    ((9, 12), 0.5)
    """
    shapes = [np.shape(raw(v)) for v in (gi, w_hh, h0, c0)]
    (s, four_n), (big_n, p) = (shapes[0] + (0, 0))[:2], (shapes[2] + (0, 0))[:2]
    n = four_n // 4
    bs = _batch_sizes(batch_sizes, big_n)
    want = [(s, 4 * n), (4 * n, p), (big_n, p), (big_n, n)]
    if w_hr is not None:
        shapes.append(np.shape(raw(w_hr)))
        want.append((p, n))
    if four_n % 4 or shapes != want or not _fits(bs, s, big_n):
        raise ShapeError(f"lstm_scan: got gi, w_hh, h0, c0{', w_hr' if w_hr is not None else ''} of shapes "
                         f"{shapes} and batch_sizes {bs}; expected (S, 4n), (4n, P), (N, P), (N, n)"
                         f"{', (P, n)' if w_hr is not None else ''} with batch_sizes non-increasing, "
                         f"starting at N and summing to S")
    xs = (gi, w_hh, h0, c0) if w_hr is None else (gi, w_hh, h0, c0, w_hr)
    return apply(LSTM_SCAN, xs, {"batch_sizes": bs, "reverse": bool(reverse)})


# ----- the GRU recurrence, fused as the LSTM's -----
#   gru_scan(gi (S, 3n), w_hh (3n, n), b_hh (3n,), h0 (N, n)) -> (S + N, 5n)
# gi = x @ w_ih.T + b_ih; b_hh stays apart (the reset gate multiplies W_hn h + b_hn). Row r < S holds
# step r's [h | r z n | W_hn h + b_hn], the last N rows the final [h_n | 0].
@_rounded_once
def _gru_scan_forward(gi: Any, w_hh: Any, b_hh: Any, h0: Any, *, batch_sizes: tuple, reverse: bool = False) -> Any:
    (s, three_n), big_n = gi.shape, h0.shape[0]
    n = three_n // 3
    out = np.zeros((s + big_n, 5 * n), dtype=np.result_type(gi, w_hh, b_hh, h0))
    h, w_t = np.array(h0, dtype=out.dtype), np.ascontiguousarray(w_hh.T)
    for start, bs in packed_steps(batch_sizes, reverse):
        gh = h[:bs] @ w_t
        gh += b_hh
        row = out[start:start + bs]
        rz = row[:, n:3 * n]
        np.add(gi[start:start + bs, :2 * n], gh[:, :2 * n], out=rz)
        rz *= 0.5                           # sigmoid as 0.5 * tanh(x / 2) + 0.5 (see _gate_act)
        np.tanh(rz, out=rz)
        rz *= 0.5
        rz += 0.5
        row[:, 4 * n:] = gh[:, 2 * n:]
        new = row[:, 3 * n:4 * n]
        np.multiply(rz[:, :n], gh[:, 2 * n:], out=new)
        new += gi[start:start + bs, 2 * n:]
        np.tanh(new, out=new)
        h_new = row[:, :n]
        np.subtract(h[:bs], new, out=h_new)
        h_new *= rz[:, n:]
        h_new += new
        h[:bs] = h_new
    out[s:, :n] = h
    return out


def _gru_sizes(gi: Any, h0: Any, batch_sizes: tuple, reverse: bool) -> tuple:
    """(S, n, N, the steps) of a GRU layer, as its rules read them."""
    (s, three_n), big_n = np.shape(raw(gi)), np.shape(raw(h0))[0]
    return s, three_n // 3, big_n, packed_steps(batch_sizes, reverse)


def _gru_saved(out: Any, rows: slice, n: int) -> tuple:
    """The gates r, z, n and ``W_hn h + b_hn`` that the forward saved in ``rows`` of its output."""
    return out[rows, n:2 * n], out[rows, 2 * n:3 * n], out[rows, 3 * n:4 * n], out[rows, 4 * n:]


def _gru_scan_grads(g: Any, out: Any, gi: Any, w_hh: Any, b_hh: Any, h0: Any, *, batch_sizes: tuple,
                    reverse: bool = False) -> tuple:
    """The cotangents of (gi, w_hh, b_hh, h0), from one backward loop over the steps."""
    s, n, big_n, steps = _gru_sizes(gi, h0, batch_sizes, reverse)
    hs = out[:s, :n]
    dh = g[s:, :n]
    dgi, dgh, h_prev = [None] * len(steps), [None] * len(steps), [None] * len(steps)
    for k, rows, bs in _step_rows(steps, backward=True):
        r, z, new, ghn = _gru_saved(out, rows, n)
        h_prev[k] = _prev_state(hs, h0, steps, k)
        dh_t = g[rows, :n] + dh[:bs]
        d_new = dh_t * (1 - z) + g[rows, 3 * n:4 * n]
        d_z = dh_t * (h_prev[k] - new) + g[rows, 2 * n:3 * n]
        d_pre_n = d_new * (1 - new * new)
        d_r = d_pre_n * ghn + g[rows, n:2 * n]
        d_ghn = d_pre_n * r + g[rows, 4 * n:]
        d_rz = concatenate([d_r * r * (1 - r), d_z * z * (1 - z)], axis=1)
        dgi[k] = concatenate([d_rz, d_pre_n], axis=1)
        dgh[k] = concatenate([d_rz, d_ghn], axis=1)
        dh_new = dh_t * z + dgh[k] @ w_hh
        dh = _carry(dh_new, dh, bs, big_n)
    dgh_all = _in_time_order(dgh, reverse)
    dw_hh = swapaxes(dgh_all, 0, 1) @ _in_time_order(h_prev, reverse)
    return _in_time_order(dgi, reverse), dw_hh, sum(dgh_all, axis=0), dh


def _gru_scan_tangent(ts: dict, out: Any, gi: Any, w_hh: Any, b_hh: Any, h0: Any, *, batch_sizes: tuple,
                      reverse: bool = False) -> Any:
    """The output's tangent for the input tangents ``ts`` ({input index: tangent}), one loop."""
    s, n, big_n, steps = _gru_sizes(gi, h0, batch_sizes, reverse)
    hs = out[:s, :n]
    dh = _start_tangent(ts, 3, h0)
    pieces = [None] * len(steps)
    for k, rows, bs in _step_rows(steps):
        r, z, new, ghn = _gru_saved(out, rows, n)
        h_prev = _prev_state(hs, h0, steps, k)
        dgh = dh[:bs] @ swapaxes(w_hh, 0, 1)
        if 1 in ts:
            dgh = dgh + h_prev @ swapaxes(ts[1], 0, 1)
        if 2 in ts:
            dgh = dgh + ts[2]
        d_pre = dgh if 0 not in ts else dgh + concatenate([ts[0][rows, :2 * n], zeros_like(dgh[:, 2 * n:])], axis=1)
        d_r, d_z = d_pre[:, :n] * r * (1 - r), d_pre[:, n:2 * n] * z * (1 - z)
        d_pre_n = d_r * ghn + r * dgh[:, 2 * n:]
        if 0 in ts:
            d_pre_n = d_pre_n + ts[0][rows, 2 * n:]
        d_new = d_pre_n * (1 - new * new)
        dh_new = d_new + d_z * (h_prev - new) + z * (dh[:bs] - d_new)
        pieces[k] = concatenate([dh_new, d_r, d_z, d_new, dgh[:, 2 * n:]], axis=1)
        dh = _carry(dh_new, dh, bs, big_n)
    return _in_time_order(pieces, reverse, concatenate([dh, zeros_like(out[s:, n:])], axis=1))


def _gru_scan_flops(out: Any, gi: Any, w_hh: Any, b_hh: Any, h0: Any, **params: Any) -> int:
    s, three_n = np.shape(gi)
    return 2 * s * three_n * (three_n // 3) + 12 * s * (three_n // 3)


GRU_SCAN = defprim("gru_scan", _gru_scan_forward, vjps=tuple(_vjp_rule(_gru_scan_grads, i) for i in range(4)),
                   jvps=tuple(_jvp_rule(_gru_scan_tangent, i) for i in range(4)), saves="xs out",
                   flops=_gru_scan_flops, kind="matmul", accumulate=True, autocast="low", batch=_batch_recurrence)


def gru_scan(gi: Any, w_hh: Any, b_hh: Any, h0: Any, batch_sizes: Any = None, reverse: bool = False) -> Any:
    """One GRU layer's recurrence over a sequence in the packed layout, as one primitive (see
    ``lstm_scan``): ``gi`` (S, 3n) = ``x @ w_ih.T + b_ih`` of every step, ``w_hh`` (3n, n),
    ``b_hh`` (3n,), ``h0`` (N, n). Returns (S + N, 5n): per row ``[h | r z n | W_hn h + b_hn]``,
    then the final ``[h_n | 0]``.

    >>> import numpy as np
    >>> from chainrule.ops.nn import gru_scan
    >>> out = gru_scan(np.zeros((3, 6)), np.zeros((6, 2)), np.zeros(6), np.ones((2, 2)), batch_sizes=(2, 1))
    >>> out.shape, float(out[0, 0])                    # h = (1 - z) * n + z * h0 = 0.5 * 0 + 0.5 * 1
    ((5, 10), 0.5)
    """
    shapes = [np.shape(raw(v)) for v in (gi, w_hh, b_hh, h0)]
    s, (big_n, n) = (shapes[0] + (0,))[0], (shapes[3] + (0, 0))[:2]
    bs = _batch_sizes(batch_sizes, big_n)
    if shapes != [(s, 3 * n), (3 * n, n), (3 * n,), (big_n, n)] or not _fits(bs, s, big_n):
        raise ShapeError(f"gru_scan: got gi, w_hh, b_hh, h0 of shapes {shapes} and batch_sizes {bs}; expected "
                         f"(S, 3n), (3n, n), (3n,), (N, n) with batch_sizes non-increasing, starting at N and "
                         f"summing to S")
    return apply(GRU_SCAN, (gi, w_hh, b_hh, h0), {"batch_sizes": bs, "reverse": bool(reverse)})


# ----- the Elman recurrence (RNN, tanh or relu), fused as the LSTM's -----
#   rnn_scan(gi (S, n), w_hh (n, n), h0 (N, n)) -> (S + N, n): row r < S is step r's h, the last N rows
# h_n. gi = x @ w_ih.T + b_ih + b_hh. The derivative is read off the output: tanh' = 1 - h^2,
# relu' = (h > 0) (relu'(0) = 0, as the relu primitive).
def _rnn_act_deriv(h: Any, nonlinearity: str) -> Any:
    return 1 - h * h if nonlinearity == "tanh" else h > 0


@_rounded_once
def _rnn_scan_forward(gi: Any, w_hh: Any, h0: Any, *, batch_sizes: tuple, reverse: bool = False,
                      nonlinearity: str = "tanh") -> Any:
    s, big_n = gi.shape[0], h0.shape[0]
    out = np.zeros((s + big_n, h0.shape[1]), dtype=np.result_type(gi, w_hh, h0))
    h, w_t = np.array(h0, dtype=out.dtype), np.ascontiguousarray(w_hh.T)
    for start, bs in packed_steps(batch_sizes, reverse):
        row = out[start:start + bs]
        np.matmul(h[:bs], w_t, out=row)
        row += gi[start:start + bs]
        if nonlinearity == "tanh":
            np.tanh(row, out=row)
        else:
            np.maximum(row, 0, out=row)
        h[:bs] = row
    out[s:] = h
    return out


def _rnn_scan_grads(g: Any, out: Any, gi: Any, w_hh: Any, h0: Any, *, batch_sizes: tuple, reverse: bool = False,
                    nonlinearity: str = "tanh") -> tuple:
    """The cotangents of (gi, w_hh, h0), from one backward loop over the steps."""
    s, big_n = np.shape(raw(gi))[0], np.shape(raw(h0))[0]
    steps = packed_steps(batch_sizes, reverse)
    hs, dh = out[:s], g[s:]
    dz, h_prev = [None] * len(steps), [None] * len(steps)
    for k, rows, bs in _step_rows(steps, backward=True):
        dz[k] = (g[rows] + dh[:bs]) * _rnn_act_deriv(hs[rows], nonlinearity)
        h_prev[k] = _prev_state(hs, h0, steps, k)
        dh_new = dz[k] @ w_hh
        dh = _carry(dh_new, dh, bs, big_n)
    dz_all = _in_time_order(dz, reverse)
    return dz_all, swapaxes(dz_all, 0, 1) @ _in_time_order(h_prev, reverse), dh


def _rnn_scan_tangent(ts: dict, out: Any, gi: Any, w_hh: Any, h0: Any, *, batch_sizes: tuple,
                      reverse: bool = False, nonlinearity: str = "tanh") -> Any:
    """The output's tangent for the input tangents ``ts`` ({input index: tangent}), one loop."""
    s, big_n = np.shape(raw(gi))[0], np.shape(raw(h0))[0]
    steps = packed_steps(batch_sizes, reverse)
    hs = out[:s]
    dh = _start_tangent(ts, 2, h0)
    pieces = [None] * len(steps)
    for k, rows, bs in _step_rows(steps):
        dz = _pre_activation_tangent(ts, rows, dh[:bs], w_hh, _prev_state(hs, h0, steps, k))
        pieces[k] = dz * _rnn_act_deriv(hs[rows], nonlinearity)
        dh = _carry(pieces[k], dh, bs, big_n)
    return _in_time_order(pieces, reverse, dh)


def _rnn_scan_flops(out: Any, gi: Any, w_hh: Any, h0: Any, **params: Any) -> int:
    s, n = np.shape(gi)
    return 2 * s * n * n + 2 * s * n


RNN_SCAN = defprim("rnn_scan", _rnn_scan_forward, vjps=tuple(_vjp_rule(_rnn_scan_grads, i) for i in range(3)),
                   jvps=tuple(_jvp_rule(_rnn_scan_tangent, i) for i in range(3)), saves="xs out",
                   flops=_rnn_scan_flops, kind="matmul", accumulate=True, autocast="low",
                   batch=_batch_recurrence)


def rnn_scan(gi: Any, w_hh: Any, h0: Any, batch_sizes: Any = None, reverse: bool = False,
             nonlinearity: str = "tanh") -> Any:
    """One Elman layer's recurrence (``h' = tanh(gi_t + h @ w_hh.T)``, or relu) over a sequence in the
    packed layout, as one primitive (see ``lstm_scan``): ``gi`` (S, n) = ``x @ w_ih.T + b_ih + b_hh``
    of every step, ``w_hh`` (n, n), ``h0`` (N, n). Returns (S + N, n): each row's h, then h_n.

    >>> import numpy as np
    >>> from chainrule.ops.nn import rnn_scan
    >>> rnn_scan(np.ones((3, 1)), np.ones((1, 1)), np.zeros((2, 1)), batch_sizes=(2, 1), nonlinearity="relu")
    array([[1.],
           [1.],
           [2.],
           [2.],
           [1.]])
    """
    shapes = [np.shape(raw(v)) for v in (gi, w_hh, h0)]
    s, (big_n, n) = (shapes[0] + (0,))[0], (shapes[2] + (0, 0))[:2]
    bs = _batch_sizes(batch_sizes, big_n)
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"rnn_scan: unknown nonlinearity {nonlinearity!r}; use 'tanh' or 'relu'")
    if shapes != [(s, n), (n, n), (big_n, n)] or not _fits(bs, s, big_n):
        raise ShapeError(f"rnn_scan: got gi, w_hh, h0 of shapes {shapes} and batch_sizes {bs}; expected (S, n), "
                         f"(n, n), (N, n) with batch_sizes non-increasing, starting at N and summing to S")
    return apply(RNN_SCAN, (gi, w_hh, h0), {"batch_sizes": bs, "reverse": bool(reverse),
                                            "nonlinearity": nonlinearity})
