"""The op-table rows of the core primitives (elementwise, shape, reduction, linalg, nn)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import chainrule as cr
from chainrule.ops.elementwise import gelu_tanh_backward
from chainrule.ops.nn import gru_scan, lstm_scan, rnn_scan
from tests.op_specs.spec import OpSpec, _t, _tl

BCAST = ((3, 1), (1, 4))
_COND = np.random.default_rng(7).uniform(size=(3, 4)) > 0.5
_SPD_SHIFT = 3.0 * np.eye(3)
_IDX = np.array([0, 2, 2, 1])                      # repeated index: gradients accumulate
_MASK = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, True]])


def _unary(name: str, domain: tuple = (-2.0, 2.0), torch_name: str | None = None, **kw: Any) -> OpSpec:
    fn = getattr(cr, name)
    tn = torch_name if torch_name is not None else name
    return OpSpec(name, fn, domain=domain, torch_fn=_t(tn) if tn else None, **kw)


def _binary(name: str, domain: tuple = (-2.0, 2.0), torch_name: str | None = None, **kw: Any) -> OpSpec:
    fn = getattr(cr, name)
    tn = torch_name if torch_name is not None else name
    return OpSpec(name, fn, shapes=BCAST, domain=domain, torch_fn=_t(tn) if tn else None, **kw)


def _torch_lstm_scan(t: Any, gi: Any, w_hh: Any, h0: Any, c0: Any, w_hr: Any = None, *, batch_sizes: tuple,
                     reverse: bool = False) -> Any:
    """lstm_scan's packed recurrence, step by step in torch ops: rows [h | c | i f g o], then the final states."""
    starts = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]).tolist()
    order = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    h, c, rows = h0, c0, {}
    for k in order:
        s, b = starts[k], batch_sizes[k]
        i, f, g, o = (gi[s:s + b] + h[:b] @ w_hh.T).chunk(4, 1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        c_new = f * c[:b] + i * g
        h_new = o * c_new.tanh() if w_hr is None else (o * c_new.tanh()) @ w_hr.T
        rows[k] = t.cat([h_new, c_new, i, f, g, o], 1)
        h, c = t.cat([h_new, h[b:]]), t.cat([c_new, c[b:]])
    final = t.cat([h, c, t.zeros(h.shape[0], gi.shape[1], dtype=h.dtype)], 1)
    return t.cat([rows[k] for k in range(len(batch_sizes))] + [final])


def _torch_gru_scan(t: Any, gi: Any, w_hh: Any, b_hh: Any, h0: Any, *, batch_sizes: tuple,
                    reverse: bool = False) -> Any:
    """gru_scan's packed recurrence in torch ops: rows [h | r z n | W_hn h + b_hn], then the final states."""
    starts = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]).tolist()
    order = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    h, rows = h0, {}
    for k in order:
        s, b = starts[k], batch_sizes[k]
        gh = h[:b] @ w_hh.T + b_hh
        r, z = (gi[s:s + b, :-h0.shape[1]] + gh[:, :-h0.shape[1]]).sigmoid().chunk(2, 1)
        new = (gi[s:s + b, -h0.shape[1]:] + r * gh[:, -h0.shape[1]:]).tanh()
        h_new = (1 - z) * new + z * h[:b]
        rows[k] = t.cat([h_new, r, z, new, gh[:, -h0.shape[1]:]], 1)
        h = t.cat([h_new, h[b:]])
    final = t.cat([h, t.zeros(h.shape[0], 4 * h.shape[1], dtype=h.dtype)], 1)
    return t.cat([rows[k] for k in range(len(batch_sizes))] + [final])


def _torch_rnn_scan(t: Any, gi: Any, w_hh: Any, h0: Any, *, batch_sizes: tuple, reverse: bool = False) -> Any:
    """rnn_scan's packed tanh recurrence in torch ops: each row's h, then h_n."""
    starts = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]).tolist()
    order = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    h, rows = h0, {}
    for k in order:
        s, b = starts[k], batch_sizes[k]
        rows[k] = (gi[s:s + b] + h[:b] @ w_hh.T).tanh()
        h = t.cat([rows[k], h[b:]])
    return t.cat([rows[k] for k in range(len(batch_sizes))] + [h])


OP_SPECS: list[OpSpec] = [
    # ----- elementwise unary -----
    _unary("negative", torch_name="neg"), _unary("exp"), _unary("exp2"),
    _unary("log", (0.2, 3.0)), _unary("log2", (0.2, 3.0)), _unary("log10", (0.2, 3.0)),
    _unary("log1p", (-0.5, 2.0)), _unary("expm1"), _unary("sqrt", (0.2, 3.0)),
    OpSpec("cbrt", cr.cbrt, domain=(0.2, 3.0), torch_fn=_tl(lambda t, x: x ** (1 / 3))),
    _unary("sin"), _unary("cos"), _unary("tan", (-1.0, 1.0)),
    _unary("arcsin", (-0.9, 0.9)), _unary("arccos", (-0.9, 0.9)), _unary("arctan"),
    _unary("sinh"), _unary("cosh"), _unary("tanh"), _unary("arcsinh"),
    _unary("arccosh", (1.2, 3.0)), _unary("arctanh", (-0.9, 0.9)),
    OpSpec("tanh_backward", cr.numpy.tanh_backward, shapes=((3, 4), (3, 4)),
           domains=((-2.0, 2.0), (-0.9, 0.9)),
           torch_fn=_tl(lambda t, g, y: t.ops.aten.tanh_backward(g, y))),
    _unary("sigmoid"), _unary("relu"), OpSpec("softplus", cr.softplus,
                                              torch_fn=_tl(lambda t, x: t.nn.functional.softplus(x))),
    _unary("erf"), OpSpec("gelu", cr.gelu, torch_fn=_tl(lambda t, x: t.nn.functional.gelu(x))),
    OpSpec("gelu_tanh", lambda x: cr.nn.functional.gelu(x, approximate="tanh"),
           torch_fn=_tl(lambda t, x: t.nn.functional.gelu(x, approximate="tanh"))),
    OpSpec("gelu_tanh_backward", gelu_tanh_backward, shapes=((3, 4), (3, 4)),
           torch_fn=_tl(lambda t, g, x: t.ops.aten.gelu_backward(g, x, approximate="tanh"))),
    _unary("abs"), _unary("reciprocal", (0.5, 2.0)), _unary("square"),
    _unary("sign", torch_name="sign"), _unary("floor"), _unary("ceil"),
    OpSpec("round", cr.round, domain=(-2.0, 2.0), torch_fn=_t("round")),
    OpSpec("alias", cr.numpy.alias, torch_fn=_tl(lambda t, x: x * 1)),
    OpSpec("copy", cr.copy, torch_fn=_tl(lambda t, x: x.clone())),
    OpSpec("astype", lambda x: cr.astype(x, np.longdouble), order=1),
    # ----- elementwise binary -----
    _binary("add"), _binary("subtract", torch_name="sub"), _binary("multiply", torch_name="mul"),
    _binary("divide", torch_name="div", domains=((-2.0, 2.0), (0.5, 2.0))),
    _binary("power", torch_name="pow", domains=((0.5, 2.0), (-1.5, 1.5))),
    OpSpec("power", lambda x: x ** 3, id="power-const", torch_fn=_tl(lambda t, x: x ** 3)),
    OpSpec("power", lambda x: 2.0 ** x, id="power-base", torch_fn=_tl(lambda t, x: 2.0 ** x)),
    _binary("maximum"), _binary("minimum"), _binary("arctan2", (0.3, 2.0), torch_name="atan2"),
    _binary("mod", torch_name="remainder", domains=((-3.0, 3.0), (0.7, 1.3))),
    _binary("floor_divide", torch_name="", domains=((-3.0, 3.0), (0.7, 1.3))),   # torch: no derivative
    OpSpec("where", lambda x, y: cr.where(_COND, x, y), shapes=((3, 4), (4,)),
           torch_fn=_tl(lambda t, x, y: t.where(t.tensor(_COND), x, y))),
    OpSpec("clip", lambda x: cr.clip(x, -0.5, 0.7), torch_fn=_tl(lambda t, x: t.clamp(x, -0.5, 0.7))),
    OpSpec("clip", lambda x, lo, hi: cr.clip(x, lo, hi), id="clip-tensor-bounds",
           shapes=((3, 4), (3, 1), (1, 4)), domains=((-2.0, 2.0), (-1.0, -0.4), (0.4, 1.0)),
           torch_fn=_tl(lambda t, x, lo, hi: t.minimum(t.maximum(x, lo), hi))),
    # ----- reductions -----
    OpSpec("sum", lambda x: cr.sum(x, axis=1, keepdims=True),
           torch_fn=_tl(lambda t, x: x.sum(dim=1, keepdim=True))),
    OpSpec("sum", lambda x: cr.sum(x), id="sum-all", shapes=((2, 3, 2),), torch_fn=_tl(lambda t, x: x.sum())),
    OpSpec("sum", lambda x: cr.sum(x, axis=(0, 2)), id="sum-tuple", shapes=((2, 3, 2),),
           torch_fn=_tl(lambda t, x: x.sum(dim=(0, 2)))),
    OpSpec("prod", lambda x: cr.prod(x, axis=0), domain=(0.5, 1.5),
           torch_fn=_tl(lambda t, x: x.prod(dim=0))),
    OpSpec("prod", lambda x: cr.prod(x), id="prod-all", shapes=((2, 3),), domain=(0.5, 1.5),
           torch_fn=_tl(lambda t, x: x.prod())),
    OpSpec("amax", lambda x: cr.amax(x, axis=1), torch_fn=_tl(lambda t, x: x.amax(dim=1))),
    OpSpec("amin", lambda x: cr.amin(x, axis=(0, 1)), torch_fn=_tl(lambda t, x: x.amin(dim=(0, 1)))),
    OpSpec("logsumexp", lambda x: cr.logsumexp(x, axis=1),
           torch_fn=_tl(lambda t, x: t.logsumexp(x, dim=1))),
    OpSpec("cumsum", lambda x: cr.cumsum(x, axis=1), torch_fn=_tl(lambda t, x: t.cumsum(x, dim=1))),
    OpSpec("cumprod", lambda x: cr.cumprod(x, axis=0), domain=(0.5, 1.5),
           torch_fn=_tl(lambda t, x: t.cumprod(x, dim=0))),
    # ----- linear algebra -----
    OpSpec("matmul", cr.matmul, shapes=((2, 3, 4), (4, 5)), torch_fn=_t("matmul")),
    OpSpec("matmul", cr.matmul, id="matmul-batch-bcast", shapes=((2, 1, 3, 4), (5, 4, 2)),
           torch_fn=_t("matmul")),
    OpSpec("matmul", cr.matmul, id="matmul-vec-mat", shapes=((4,), (2, 4, 3)), torch_fn=_t("matmul")),
    OpSpec("matmul", cr.matmul, id="matmul-mat-vec", shapes=((2, 3, 4), (4,)), torch_fn=_t("matmul")),
    OpSpec("matmul", cr.matmul, id="matmul-vec-vec", shapes=((4,), (4,)), torch_fn=_t("matmul")),
    OpSpec("linear", cr.numpy.linear, shapes=((2, 3, 4), (5, 4), (5,)),
           torch_fn=_tl(lambda t, x, w, b: t.nn.functional.linear(x, w, b))),
    OpSpec("linear", cr.numpy.linear, id="linear-2d", shapes=((3, 4), (2, 4), (2,)),
           torch_fn=_tl(lambda t, x, w, b: t.nn.functional.linear(x, w, b))),
    OpSpec("einsum", lambda x, y: cr.einsum("bij,bjk->bik", x, y), shapes=((2, 3, 4), (2, 4, 2)),
           torch_fn=_tl(lambda t, x, y: t.einsum("bij,bjk->bik", x, y))),
    OpSpec("einsum", lambda x: cr.einsum("ii->i", x), id="einsum-diag", shapes=((3, 3),),
           torch_fn=_tl(lambda t, x: t.einsum("ii->i", x))),
    OpSpec("einsum", lambda x, y: cr.einsum("ij,k->", x, y), id="einsum-sum-out",
           shapes=((2, 3), (4,)), torch_fn=_tl(lambda t, x, y: t.einsum("ij,k->", x, y))),
    OpSpec("einsum", lambda x, y: cr.einsum("...ij,...j->...i", x, y), id="einsum-ellipsis",
           shapes=((2, 3, 4), (2, 4)), torch_fn=_tl(lambda t, x, y: t.einsum("...ij,...j->...i", x, y))),
    OpSpec("inv", lambda x: cr.linalg.inv(x + _SPD_SHIFT), shapes=((3, 3),), domain=(-0.5, 0.5),
           torch_fn=_tl(lambda t, x: t.linalg.inv(x + t.tensor(_SPD_SHIFT)))),
    OpSpec("solve", lambda a, b: cr.linalg.solve(a + _SPD_SHIFT, b), shapes=((3, 3), (3, 2)),
           domain=(-0.5, 0.5), torch_fn=_tl(lambda t, a, b: t.linalg.solve(a + t.tensor(_SPD_SHIFT), b))),
    OpSpec("solve", lambda a, b: cr.linalg.solve(a + _SPD_SHIFT, b), id="solve-vector",
           shapes=((3, 3), (3,)), domain=(-0.5, 0.5),
           torch_fn=_tl(lambda t, a, b: t.linalg.solve(a + t.tensor(_SPD_SHIFT), b))),
    OpSpec("det", lambda x: cr.linalg.det(x + _SPD_SHIFT), shapes=((2, 3, 3),), domain=(-0.5, 0.5),
           torch_fn=_tl(lambda t, x: t.linalg.det(x + t.tensor(_SPD_SHIFT)))),
    OpSpec("logdet", lambda x: cr.linalg.slogdet(x - _SPD_SHIFT)[1], shapes=((3, 3),),
           domain=(-0.5, 0.5), torch_fn=_tl(lambda t, x: t.linalg.slogdet(x - t.tensor(_SPD_SHIFT))[1])),
    OpSpec("cholesky", lambda x: cr.linalg.cholesky(x @ x.T + _SPD_SHIFT), shapes=((3, 3),),
           torch_fn=_tl(lambda t, x: t.linalg.cholesky(x @ x.T + t.tensor(_SPD_SHIFT)))),
    # ----- shape and indexing -----
    OpSpec("reshape", lambda x: cr.reshape(x, (2, 6)), torch_fn=_tl(lambda t, x: x.reshape(2, 6))),
    OpSpec("transpose", lambda x: cr.transpose(x, (1, 2, 0)), shapes=((2, 3, 4),),
           torch_fn=_tl(lambda t, x: x.permute(1, 2, 0))),
    OpSpec("broadcast_to", lambda x: cr.broadcast_to(x, (2, 3, 4)), shapes=((3, 1),),
           torch_fn=_tl(lambda t, x: x.expand(2, 3, 4))),
    OpSpec("concatenate", lambda x, y: cr.concatenate([x, y, x], axis=1), shapes=((3, 2), (3, 4)),
           torch_fn=_tl(lambda t, x, y: t.cat([x, y, x], dim=1))),
    OpSpec("flip", lambda x: cr.flip(x, 1), torch_fn=_tl(lambda t, x: t.flip(x, (1,)))),
    OpSpec("roll", lambda x: cr.roll(x, 2, axis=1), torch_fn=_tl(lambda t, x: t.roll(x, 2, 1))),
    OpSpec("pad", lambda x: cr.pad(x, ((1, 0), (2, 1))),
           torch_fn=_tl(lambda t, x: t.nn.functional.pad(x, (2, 1, 1, 0)))),
    OpSpec("getitem", lambda x: x[1:, ::2], torch_fn=_tl(lambda t, x: x[1:, ::2])),
    OpSpec("getitem", lambda x: x[_IDX], id="getitem-repeated", shapes=((3, 4),),
           torch_fn=_tl(lambda t, x: x[t.tensor(_IDX)])),
    OpSpec("getitem", lambda x: x[_MASK], id="getitem-mask", torch_fn=_tl(lambda t, x: x[t.tensor(_MASK)])),
    OpSpec("getitem", lambda x: x[..., None, 1], id="getitem-ellipsis-none",
           torch_fn=_tl(lambda t, x: x[..., None, 1])),
    OpSpec("scatter_add", lambda x: cr.numpy.scatter_add(x, (_IDX,), (3, 4)), shapes=((4, 4),),
           torch_fn=_tl(lambda t, x: t.zeros(3, 4, dtype=x.dtype).index_add(0, t.tensor(_IDX), x))),
    OpSpec("conj", cr.conj, torch_fn=_tl(lambda t, x: x.conj())),
    OpSpec("real", cr.real, torch_fn=_tl(lambda t, x: t.real(x))),
    OpSpec("imag", lambda x: cr.imag(x) + x, torch_fn=None),     # of real data: zeros (torch refuses)
    OpSpec("angle", cr.angle, domain=(0.5, 2.0), torch_fn=_tl(lambda t, x: t.angle(x))),
    OpSpec("view_as_complex", lambda x: cr.view_as_complex(x).real * 2 + cr.view_as_complex(x).imag,
           shapes=((3, 2),), torch_fn=_tl(lambda t, x: t.view_as_complex(x).real * 2 + t.view_as_complex(x).imag)),
    OpSpec("view_as_real", lambda x: cr.view_as_real(cr.view_as_complex(x.astype(cr.float64))) * x,
           shapes=((3, 2),),
           torch_fn=_tl(lambda t, x: t.view_as_real(t.view_as_complex(x)) * x)),
    OpSpec("diagonal", lambda x: cr.diagonal(x, 1), torch_fn=_tl(lambda t, x: x.diagonal(1))),
    OpSpec("diagonal", lambda x: cr.diagonal(x, -1, 2, 0), id="diagonal-3d", shapes=((3, 4, 5),),
           torch_fn=_tl(lambda t, x: x.diagonal(-1, 2, 0))),
    OpSpec("diagonal_scatter", lambda x, v: cr.diagonal_scatter(x, v, 1), shapes=((3, 4), (3,)),
           torch_fn=_tl(lambda t, x, v: t.diagonal_scatter(x, v, 1))),
    OpSpec("index_put", lambda x, v: cr.numpy.index_put(x, (slice(None), 1), v), shapes=((3, 4), (3,)),
           torch_fn=_tl(lambda t, x, v: x.index_put((t.arange(3), t.tensor(1)), v))),
    # ----- nn -----
    OpSpec("softmax", lambda x: cr.softmax(x, axis=1), torch_fn=_tl(lambda t, x: t.softmax(x, dim=1))),
    OpSpec("softmax_cross_entropy", lambda x: cr.numpy.softmax_cross_entropy(x, [2, 0, 3]),
           torch_fn=_tl(lambda t, x: t.nn.functional.cross_entropy(x, t.tensor([2, 0, 3]), reduction="none"))),
    OpSpec("softmax_cross_entropy", lambda x: cr.numpy.softmax_cross_entropy(x, [2, 0, 3], "mean"),
           id="softmax_cross_entropy-mean",
           torch_fn=_tl(lambda t, x: t.nn.functional.cross_entropy(x, t.tensor([2, 0, 3])))),
    OpSpec("softmax_cross_entropy", lambda x: cr.numpy.softmax_cross_entropy(x, [2, 0, 3], "sum"),
           id="softmax_cross_entropy-sum",
           torch_fn=_tl(lambda t, x: t.nn.functional.cross_entropy(x, t.tensor([2, 0, 3]), reduction="sum"))),
    OpSpec("log_softmax", lambda x: cr.log_softmax(x, axis=0),
           torch_fn=_tl(lambda t, x: t.log_softmax(x, dim=0))),
    # the fused LSTM recurrence over a packed batch (lengths 3, 2, 1): rows [h | c | gates], final states
    OpSpec("lstm_scan", lambda *xs: lstm_scan(*xs, batch_sizes=(3, 2, 1)), shapes=((6, 8), (8, 2), (3, 2), (3, 2)),
           torch_fn=_tl(lambda t, *xs: _torch_lstm_scan(t, *xs, batch_sizes=(3, 2, 1)))),
    OpSpec("lstm_scan", lambda *xs: lstm_scan(*xs, batch_sizes=(2, 2, 1), reverse=True), id="lstm_scan-reverse-proj",
           shapes=((5, 8), (8, 1), (2, 1), (2, 2), (1, 2)),
           torch_fn=_tl(lambda t, *xs: _torch_lstm_scan(t, *xs, batch_sizes=(2, 2, 1), reverse=True))),
    OpSpec("gru_scan", lambda *xs: gru_scan(*xs, batch_sizes=(3, 2, 1)), shapes=((6, 6), (6, 2), (6,), (3, 2)),
           torch_fn=_tl(lambda t, *xs: _torch_gru_scan(t, *xs, batch_sizes=(3, 2, 1)))),
    OpSpec("gru_scan", lambda *xs: gru_scan(*xs, batch_sizes=(2, 1), reverse=True), id="gru_scan-reverse",
           shapes=((3, 6), (6, 2), (6,), (2, 2)),
           torch_fn=_tl(lambda t, *xs: _torch_gru_scan(t, *xs, batch_sizes=(2, 1), reverse=True))),
    OpSpec("rnn_scan", lambda *xs: rnn_scan(*xs, batch_sizes=(3, 2, 1)), shapes=((6, 2), (2, 2), (3, 2)),
           torch_fn=_tl(lambda t, *xs: _torch_rnn_scan(t, *xs, batch_sizes=(3, 2, 1)))),
    OpSpec("rnn_scan", lambda *xs: rnn_scan(*xs, batch_sizes=(2, 2, 1), reverse=True), id="rnn_scan-reverse",
           shapes=((5, 2), (2, 2), (2, 2)),
           torch_fn=_tl(lambda t, *xs: _torch_rnn_scan(t, *xs, batch_sizes=(2, 2, 1), reverse=True))),
]

# Non-differentiable primitives: their results never require grad.
NONDIFF_SPECS = {
    "less": lambda x: x < 0, "less_equal": lambda x: x <= 0, "greater": lambda x: x > 0,
    "greater_equal": lambda x: x >= 0, "equal": lambda x: x == x, "not_equal": lambda x: x != 0,
    "logical_and": lambda x: (x > 0) & (x < 1), "logical_or": lambda x: (x > 0) | (x < -1),
    "logical_not": lambda x: ~(x > 0), "isnan": cr.isnan, "isfinite": cr.isfinite, "isinf": cr.isinf,
    "argmax": lambda x: cr.argmax(x, axis=1), "argmin": lambda x: cr.argmin(x, axis=0, keepdims=True),
    "argsort": lambda x: cr.argsort(x, axis=1),
}

# Ops whose derivative is piecewise constant (zero): second order adds nothing
ZERO_GRAD = {"sign": cr.sign, "floor": cr.floor, "ceil": cr.ceil, "round": cr.round,
             "floor_divide": lambda x: cr.floor_divide(x, 0.7)}


# ----- complex data: every complex-capable primitive (PRIMITIVES[name].complex is not None) -----
# Domains keep each function away from its branch cuts and poles (log, sqrt, power: real part > 0;
# arcsin, arccos, arctanh: |real part| < 1; arctan, arcsinh: |imaginary part| < 1; arccosh: real
# part > 1). Mixed real/complex inputs ("rc", "cr") check the real input's gradient, the real part.
def _cunary(name: str, domain: tuple = (-2.0, 2.0), torch_name: str | None = None, **kw: Any) -> OpSpec:
    fn = getattr(cr, name)
    tn = torch_name if torch_name is not None else name
    return OpSpec(name, fn, domain=domain, torch_fn=_t(tn) if tn else None, kinds="c", **kw)


def _cbinary(name: str, kinds: str = "cc", torch_name: str | None = None, **kw: Any) -> OpSpec:
    fn = getattr(cr, name)
    tn = torch_name if torch_name is not None else name
    return OpSpec(name, fn, shapes=BCAST, torch_fn=_t(tn) if tn else None, kinds=kinds,
                  id=kw.pop("id", f"{name}-{kinds}"), **kw)


def _warnless(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A torch call whose (expected) complex-to-real cast warning is silenced."""
    def call(*xs: Any) -> Any:
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*xs)
    return call


_NARROW = (-0.5, 0.5)
_CSHIFT = _SPD_SHIFT + 0j

COMPLEX_SPECS: list[OpSpec] = [
    # ----- linear: real coefficients, the rules hold as written -----
    _cunary("negative", torch_name="neg"),
    OpSpec("copy", cr.copy, kinds="c", torch_fn=_tl(lambda t, x: x.clone())),
    OpSpec("alias", cr.numpy.alias, kinds="c", torch_fn=_tl(lambda t, x: x * 1)),
    _cbinary("add"), _cbinary("add", "rc"),
    _cbinary("subtract", torch_name="sub"), _cbinary("subtract", "cr", torch_name="sub"),
    OpSpec("where", lambda x, y: cr.where(_COND, x, y), shapes=((3, 4), (4,)), kinds="cc",
           torch_fn=_tl(lambda t, x, y: t.where(t.tensor(_COND), x, y))),
    OpSpec("where", lambda x, y: cr.where(_COND, x, y), id="where-cr", shapes=((3, 4), (4,)), kinds="cr",
           torch_fn=_tl(lambda t, x, y: t.where(t.tensor(_COND), x, y.to(x.dtype)))),
    OpSpec("reshape", lambda x: cr.reshape(x, (2, 6)), kinds="c", torch_fn=_tl(lambda t, x: x.reshape(2, 6))),
    OpSpec("transpose", lambda x: cr.transpose(x, (1, 2, 0)), shapes=((2, 3, 4),), kinds="c",
           torch_fn=_tl(lambda t, x: x.permute(1, 2, 0))),
    OpSpec("broadcast_to", lambda x: cr.broadcast_to(x, (2, 3, 4)), shapes=((3, 1),), kinds="c",
           torch_fn=_tl(lambda t, x: x.expand(2, 3, 4))),
    OpSpec("diagonal", lambda x: cr.diagonal(x, 1), kinds="c", torch_fn=_tl(lambda t, x: x.diagonal(1))),
    OpSpec("diagonal_scatter", lambda x, v: cr.diagonal_scatter(x, v, 1), shapes=((3, 4), (3,)), kinds="cc",
           torch_fn=_tl(lambda t, x, v: t.diagonal_scatter(x, v, 1))),
    OpSpec("concatenate", lambda x, y: cr.concatenate([x, y, x], axis=1), shapes=((3, 2), (3, 4)), kinds="cc",
           torch_fn=_tl(lambda t, x, y: t.cat([x, y, x], dim=1))),
    OpSpec("concatenate", lambda x, y: cr.concatenate([x, y], axis=1), id="concatenate-rc",
           shapes=((3, 2), (3, 4)), kinds="rc", torch_fn=_tl(lambda t, x, y: t.cat([x.to(y.dtype), y], dim=1))),
    OpSpec("flip", lambda x: cr.flip(x, 1), kinds="c", torch_fn=_tl(lambda t, x: t.flip(x, (1,)))),
    OpSpec("roll", lambda x: cr.roll(x, 2, axis=1), kinds="c", torch_fn=_tl(lambda t, x: t.roll(x, 2, 1))),
    OpSpec("pad", lambda x: cr.pad(x, ((1, 0), (2, 1))), kinds="c",
           torch_fn=_tl(lambda t, x: t.nn.functional.pad(x, (2, 1, 1, 0)))),
    OpSpec("getitem", lambda x: x[1:, ::2], kinds="c", torch_fn=_tl(lambda t, x: x[1:, ::2])),
    OpSpec("getitem", lambda x: x[_IDX], id="getitem-repeated", kinds="c",
           torch_fn=_tl(lambda t, x: x[t.tensor(_IDX)])),
    OpSpec("getitem", lambda x: x[_MASK], id="getitem-mask", kinds="c", torch_fn=_tl(lambda t, x: x[t.tensor(_MASK)])),
    OpSpec("scatter_add", lambda x: cr.numpy.scatter_add(x, (_IDX,), (3, 4)), shapes=((4, 4),), kinds="c",
           torch_fn=_tl(lambda t, x: t.zeros(3, 4, dtype=x.dtype).index_add(0, t.tensor(_IDX), x))),
    OpSpec("index_put", lambda x, v: cr.numpy.index_put(x, (slice(None), 1), v), shapes=((3, 4), (3,)),
           kinds="cc", torch_fn=_tl(lambda t, x, v: x.index_put((t.arange(3), t.tensor(1)), v))),
    OpSpec("sum", lambda x: cr.sum(x, axis=1, keepdims=True), kinds="c",
           torch_fn=_tl(lambda t, x: x.sum(dim=1, keepdim=True))),
    OpSpec("sum", lambda x: cr.sum(x), id="sum-all", shapes=((2, 3, 2),), kinds="c",
           torch_fn=_tl(lambda t, x: x.sum())),
    OpSpec("cumsum", lambda x: cr.cumsum(x, axis=1), kinds="c", torch_fn=_tl(lambda t, x: t.cumsum(x, dim=1))),
    # ----- holomorphic: analytic rules, conjugated for the VJP -----
    _cunary("exp"), _cunary("exp2"),
    _cunary("log", (0.2, 3.0)), _cunary("log2", (0.2, 3.0)), _cunary("log10", (0.2, 3.0)),
    _cunary("log1p", (-0.5, 2.0)), _cunary("expm1"), _cunary("sqrt", (0.2, 3.0)),
    _cunary("sin"), _cunary("cos"), _cunary("tan", (-1.0, 1.0)),
    _cunary("arcsin", (-0.9, 0.9), torch_name="asin", imag=_NARROW),
    _cunary("arccos", (-0.9, 0.9), torch_name="acos", imag=_NARROW),
    _cunary("arctan", torch_name="atan", imag=_NARROW),
    _cunary("sinh"), _cunary("cosh"), _cunary("tanh", (-1.0, 1.0)),
    _cunary("arcsinh", torch_name="asinh", imag=_NARROW),
    _cunary("arccosh", (1.2, 3.0), torch_name="acosh"),
    _cunary("arctanh", (-0.9, 0.9), torch_name="atanh", imag=_NARROW),
    OpSpec("tanh_backward", cr.numpy.tanh_backward, shapes=((3, 4), (3, 4)), kinds="cc",
           domains=((-2.0, 2.0), (-0.9, 0.9)), imag=_NARROW,
           # torch's is the VJP of tanh, g * conj(1 - y^2); chainrule's the analytic x (1 - y^2)
           torch_fn=_tl(lambda t, g, y: t.ops.aten.tanh_backward(g, y.conj_physical()))),
    _cunary("sigmoid"), _cunary("reciprocal", (0.5, 2.0)), _cunary("square"),
    _cbinary("multiply", torch_name="mul"), _cbinary("multiply", "rc", torch_name="mul"),
    _cbinary("divide", torch_name="div", domains=((-2.0, 2.0), (0.5, 2.0))),
    _cbinary("divide", "rc", torch_name="div", domains=((-2.0, 2.0), (0.5, 2.0))),
    _cbinary("divide", "cr", torch_name="div", domains=((-2.0, 2.0), (0.5, 2.0))),
    _cbinary("power", torch_name="pow", domains=((0.5, 2.0), (-1.5, 1.5)), imag=_NARROW),
    _cbinary("power", "cr", torch_name="pow", domains=((0.5, 2.0), (-1.5, 1.5)), imag=_NARROW),
    _cbinary("power", "rc", torch_name="pow", domains=((0.5, 2.0), (-1.5, 1.5)), imag=_NARROW),
    OpSpec("power", lambda x: x ** 3, id="power-const", kinds="c", torch_fn=_tl(lambda t, x: x ** 3)),
    OpSpec("power", lambda x: 2.0 ** x, id="power-base", kinds="c", torch_fn=_tl(lambda t, x: 2.0 ** x)),
    OpSpec("prod", lambda x: cr.prod(x, axis=0), domain=(0.5, 1.5), imag=_NARROW, kinds="c",
           torch_fn=_tl(lambda t, x: x.prod(dim=0))),
    OpSpec("prod", lambda x: cr.prod(x), id="prod-all", shapes=((2, 3),), domain=(0.5, 1.5), imag=_NARROW,
           kinds="c", torch_fn=_tl(lambda t, x: x.prod())),
    OpSpec("cumprod", lambda x: cr.cumprod(x, axis=0), domain=(0.5, 1.5), imag=_NARROW, kinds="c",
           torch_fn=_tl(lambda t, x: t.cumprod(x, dim=0))),
    OpSpec("matmul", cr.matmul, shapes=((2, 3, 4), (4, 5)), kinds="cc", torch_fn=_t("matmul")),
    OpSpec("matmul", cr.matmul, id="matmul-rc", shapes=((3, 4), (4, 2)), kinds="rc",
           torch_fn=_tl(lambda t, x, y: t.matmul(x.to(y.dtype), y))),
    OpSpec("matmul", cr.matmul, id="matmul-vec-vec", shapes=((4,), (4,)), kinds="cc", torch_fn=_t("matmul")),
    OpSpec("linear", cr.numpy.linear, shapes=((2, 3, 4), (5, 4), (5,)), kinds="ccc",
           torch_fn=_tl(lambda t, x, w, b: t.nn.functional.linear(x, w, b))),
    OpSpec("linear", cr.numpy.linear, id="linear-crc", shapes=((3, 4), (2, 4), (2,)), kinds="crc",
           torch_fn=_tl(lambda t, x, w, b: t.nn.functional.linear(x, w.to(x.dtype), b))),
    OpSpec("einsum", lambda x, y: cr.einsum("bij,bjk->bik", x, y), shapes=((2, 3, 4), (2, 4, 2)), kinds="cc",
           torch_fn=_tl(lambda t, x, y: t.einsum("bij,bjk->bik", x, y))),
    OpSpec("einsum", lambda x: cr.einsum("ii->i", x), id="einsum-diag", shapes=((3, 3),), kinds="c",
           torch_fn=_tl(lambda t, x: t.einsum("ii->i", x))),
    OpSpec("inv", lambda x: cr.linalg.inv(x + _CSHIFT), shapes=((3, 3),), domain=_NARROW, imag=_NARROW,
           kinds="c", torch_fn=_tl(lambda t, x: t.linalg.inv(x + t.tensor(_CSHIFT)))),
    OpSpec("solve", lambda a, b: cr.linalg.solve(a + _CSHIFT, b), shapes=((3, 3), (3, 2)), domain=_NARROW,
           imag=_NARROW, kinds="cc", torch_fn=_tl(lambda t, a, b: t.linalg.solve(a + t.tensor(_CSHIFT), b))),
    OpSpec("solve", lambda a, b: cr.linalg.solve(a + _SPD_SHIFT, b), id="solve-rc", shapes=((3, 3), (3,)),
           domain=_NARROW, imag=_NARROW, kinds="rc",
           torch_fn=_tl(lambda t, a, b: t.linalg.solve((a + t.tensor(_SPD_SHIFT)).to(b.dtype), b))),
    OpSpec("det", lambda x: cr.linalg.det(x + _CSHIFT), shapes=((2, 3, 3),), domain=_NARROW, imag=_NARROW,
           kinds="c", torch_fn=_tl(lambda t, x: t.linalg.det(x + t.tensor(_CSHIFT)))),
    # ----- own rules: real-valued functions of z, views between C and R^2, casts -----
    _cunary("abs"), _cunary("angle"), _cunary("real"), _cunary("imag"),
    OpSpec("conj", cr.conj, kinds="c", torch_fn=_tl(lambda t, x: x.conj())),
    OpSpec("astype", lambda x: cr.astype(x, np.float64), id="astype-c2r", kinds="c",
           torch_fn=_warnless(_tl(lambda t, x: x.to(t.float64)))),
    OpSpec("astype", lambda x: cr.astype(x, np.complex128) * (1 + 2j), id="astype-r2c", kinds="r",
           torch_fn=_tl(lambda t, x: x.to(t.complex128) * (1 + 2j))),
    OpSpec("view_as_real", cr.view_as_real, kinds="c", torch_fn=_t("view_as_real")),
    OpSpec("view_as_complex", cr.view_as_complex, shapes=((3, 2),), kinds="r", torch_fn=_t("view_as_complex")),
    # ----- fft: the transform's primitive, directly and through the real-data composites -----
    OpSpec("fftn", lambda x: cr.fft.fftn(x), kinds="c", torch_fn=_tl(lambda t, x: t.fft.fftn(x))),
    OpSpec("fftn", lambda x: cr.fft.ifftn(x, axes=(1,), norm="ortho"), id="fftn-ifft-ortho", kinds="c",
           torch_fn=_tl(lambda t, x: t.fft.ifftn(x, dim=(1,), norm="ortho"))),
    OpSpec("rfftn", lambda x: cr.fft.rfft(x), id="rfftn-rfft", kinds="r", torch_fn=_tl(lambda t, x: t.fft.rfft(x))),
    OpSpec("irfftn", lambda x: cr.fft.irfft(x), id="irfftn-irfft", kinds="c",
           torch_fn=_tl(lambda t, x: t.fft.irfft(x))),
    OpSpec("irfftn", lambda x: cr.fft.irfft2(x, (3, 5), norm="ortho"), id="irfftn-irfft2-odd", kinds="c",
           torch_fn=_tl(lambda t, x: t.fft.irfft2(x, (3, 5), norm="ortho"))),
]
