"""NumPy's argument forms on Tensors: each compared with NumPy (values, dtypes, shapes) and, where
differentiable, with central differences; every keyword of every dispatched NumPy function is
supported or refused by name; ufunc methods; non-differentiable and non-math functions on the data."""
import inspect
import warnings

import numpy as np
import pytest

import chainrule as cr
from chainrule.core.errors import UnsupportedArgument
from tools import coverage

RNG = np.random.default_rng(3)
X = RNG.normal(size=(3, 4))
MASK = RNG.uniform(size=(3, 4)) > 0.4
MASK[0] = False                                          # a row with nothing selected


def same(got, want, rtol=1e-12, atol=1e-14):
    got = got.data if isinstance(got, cr.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def check_grad(f, *xs, h=1e-6):
    """Reverse- and forward-mode directional derivatives of sum(f * w) against central differences."""
    xs = [np.asarray(x, dtype=float) for x in xs]
    rng = np.random.default_rng(0)
    w = rng.standard_normal(np.shape(f(*[cr.tensor(x) for x in xs]).data))
    dirs = [rng.standard_normal(x.shape) for x in xs]

    def loss(*ts):
        return cr.sum(f(*ts) * w)
    g = cr.grad(loss, argnums=tuple(range(len(xs))))(*[cr.tensor(x) for x in xs])
    g = g if isinstance(g, tuple) else (g,)
    rev = sum(float(np.sum(gi.data * d)) for gi, d in zip(g, dirs))
    fwd = float(cr.jvp(loss, tuple(cr.tensor(x) for x in xs), tuple(cr.tensor(d) for d in dirs))[1].data)
    with np.errstate(all="ignore"):
        num = (float(loss(*[cr.tensor(x + h * d) for x, d in zip(xs, dirs)]).data)
               - float(loss(*[cr.tensor(x - h * d) for x, d in zip(xs, dirs)]).data)) / (2 * h)
    assert abs(rev - num) <= 1e-6 * max(1, abs(num)) and abs(fwd - num) <= 1e-6 * max(1, abs(num)), (rev, fwd, num)


# ----- joining, splitting, taking -----
def test_take_along_axis_with_axis_none_takes_from_the_flattened_array():
    idx = np.array([11, 0, 5, 5])
    same(np.take_along_axis(cr.tensor(X), idx, axis=None), np.take_along_axis(X, idx, axis=None))
    check_grad(lambda t: cr.take_along_axis(t, idx, axis=None), X)


@pytest.mark.parametrize("fn", [np.vstack, np.hstack, np.concatenate, np.stack])
def test_joining_functions_take_dtype_and_casting(fn):
    a, b = X, X.astype(np.float32)
    for kw in ({}, {"dtype": None}, {"dtype": np.float32}, {"casting": "same_kind"}, {"dtype": np.float32,
                                                                                         "casting": "unsafe"}):
        same(fn([cr.tensor(a), cr.tensor(b)], **kw), fn([a, b], **kw))
    with pytest.raises(TypeError, match="casting"):
        fn([cr.tensor(a), cr.tensor(b)], dtype=np.int64, casting="same_kind")
    with pytest.raises(TypeError):
        fn([a, b], dtype=np.int64, casting="same_kind")          # (NumPy refuses it too)


def test_row_stack_runs_through_vstack():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        same(np.row_stack([cr.tensor(X), cr.tensor(X)]), np.row_stack([X, X]))


def test_concatenate_and_stack_refuse_out():
    with pytest.raises(TypeError, match="out="):
        np.concatenate([cr.tensor(X)], out=np.zeros((3, 4)))


@pytest.mark.parametrize("where", [[2, 5], [0, 1, 1, 9], np.array([3])])
def test_array_split_with_indices(where):
    got = np.array_split(cr.tensor(np.arange(7.0)), where)
    want = np.array_split(np.arange(7.0), where)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w)
    for g, w in zip(np.array_split(cr.tensor(X), [1, 3], axis=1), np.array_split(X, [1, 3], axis=1)):
        same(g, w)


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_take_modes(mode):
    idx = [0, 11, -1, 5] if mode == "raise" else [0, 13, -1, -14, 25]
    same(np.take(cr.tensor(X), idx, mode=mode), np.take(X, idx, mode=mode))
    same(np.take(cr.tensor(X), idx, axis=1, mode=mode) if mode != "raise" else cr.take(cr.tensor(X), [0, 3, -1], 1),
         np.take(X, idx, axis=1, mode=mode) if mode != "raise" else np.take(X, [0, 3, -1], 1))
    check_grad(lambda t: cr.take(t, [0, 13, 13, -1], mode="wrap"), X)
    with pytest.raises(ValueError, match="mode"):
        cr.take(cr.tensor(X), [0], mode="bogus")


# ----- einsum -----
def test_einsum_sublist_form_and_optimize():
    a, b, c = RNG.normal(size=(2, 3)), RNG.normal(size=(3, 4)), RNG.normal(size=(4,))
    ta, tb, tc = cr.tensor(a), cr.tensor(b), cr.tensor(c)
    same(np.einsum(ta, [0, 1], tb, [1, 2]), np.einsum(a, [0, 1], b, [1, 2]))
    same(np.einsum(ta, [0, 1], tb, [1, 2], [2, 0]), np.einsum(a, [0, 1], b, [1, 2], [2, 0]))
    same(np.einsum(ta, [30, 1], tb, [1, 2]), np.einsum(a, [30, 1], b, [1, 2]))      # implicit order: 2 < 30
    same(np.einsum(ta, [Ellipsis, 1], tb, [1, 2], tc, [2], [Ellipsis]),
         np.einsum(a, [Ellipsis, 1], b, [1, 2], c, [2], [Ellipsis]))
    for opt in (False, True, "greedy", "optimal"):
        same(np.einsum("ij,jk,k->i", ta, tb, tc, optimize=opt), np.einsum("ij,jk,k->i", a, b, c, optimize=opt))
    same(np.einsum("ij->ji", ta, order="F"), np.einsum("ij->ji", a, order="F"))
    same(np.einsum("ij->", ta, dtype=np.float32, casting="same_kind"),
         np.einsum("ij->", a, dtype=np.float32, casting="same_kind"), rtol=1e-6)
    check_grad(lambda x, y: cr.einsum(x, [0, 1], y, [1, 2], [2, 0]), a, b)
    with pytest.raises(TypeError, match="out="):
        np.einsum("ij->", ta, out=np.zeros(()))


# ----- reductions: where=, initial= -----
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "var", "std"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_reductions_with_where(name, axis):
    f = getattr(np, name)
    for keepdims in (False, True):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            same(f(cr.tensor(X), axis=axis, keepdims=keepdims, where=MASK), f(X, axis=axis, keepdims=keepdims,
                                                                               where=MASK))
    if name in ("sum", "prod") or axis is None:
        check_grad(lambda t: getattr(cr, name)(t, axis=axis, where=MASK), X)
    x = cr.tensor(X, requires_grad=True)
    getattr(cr, name)(x, where=MASK).backward()
    assert np.all(x.grad.data[~MASK] == 0)                 # masked entries get no gradient


@pytest.mark.parametrize("name", ["max", "min", "sum", "prod"])
def test_reductions_with_initial(name):
    f = getattr(np, name)
    for axis in (None, 0, 1):
        for initial in (0.25, -3.0, 7.0):
            same(f(cr.tensor(X), axis=axis, initial=initial), f(X, axis=axis, initial=initial))
            same(f(cr.tensor(X), axis=axis, initial=initial, where=MASK), f(X, axis=axis, initial=initial,
                                                                             where=MASK))
    same(f(cr.tensor(np.zeros((0, 3))), axis=0, initial=1.5), f(np.zeros((0, 3)), axis=0, initial=1.5))
    same(f(cr.tensor(np.arange(6).reshape(2, 3)), axis=1, initial=4), f(np.arange(6).reshape(2, 3), axis=1, initial=4))
    check_grad(lambda t: getattr(cr, name)(t, axis=1, initial=0.25, where=MASK), X)


def test_max_with_where_needs_initial_as_numpy():
    with pytest.raises(ValueError, match="initial"):
        np.max(cr.tensor(X), where=MASK)


def test_average_returned_and_keepdims():
    w = RNG.uniform(0.5, 1.5, size=(3, 4))
    w1 = RNG.uniform(0.5, 1.5, size=4)
    for axis in (None, 0, 1):
        for keepdims in (False, True):
            for weights in (None, w):
                got = np.average(cr.tensor(X), axis=axis, weights=weights, returned=True, keepdims=keepdims)
                want = np.average(X, axis=axis, weights=weights, returned=True, keepdims=keepdims)
                same(got[0], want[0])
                same(got[1], want[1])
    same(np.average(cr.tensor(X), axis=1, weights=w1, keepdims=True), np.average(X, axis=1, weights=w1,
                                                                                  keepdims=True))
    check_grad(lambda t, u: cr.average(t, axis=1, weights=u, returned=True)[1] * 2
               + cr.average(t, axis=1, weights=u, returned=True)[0], X, w)


# ----- pad -----
PADS = [1, (2, 3), ((1, 7), (9, 2)), ((0, 0), (3, 0))]


@pytest.mark.parametrize("mode, kw", [("edge", {}), ("wrap", {}), ("reflect", {}), ("symmetric", {}),
                                      ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"}),
                                      ("linear_ramp", {}), ("linear_ramp", {"end_values": ((1.5, -2), (0.5, 3))}),
                                      ("maximum", {}), ("minimum", {"stat_length": 2}), ("mean", {}),
                                      ("mean", {"stat_length": ((1, 2), (3, 1))}), ("median", {}),
                                      ("median", {"stat_length": (2, 3)}), ("constant", {"constant_values": 2.5})])
def test_pad_modes(mode, kw):
    for width in PADS:
        same(np.pad(cr.tensor(X), width, mode=mode, **kw), np.pad(X, width, mode=mode, **kw), atol=1e-13)
    if not any(isinstance(v, tuple) and isinstance(v[0], tuple) for v in kw.values()):    # (per-axis: 2-D only)
        same(np.pad(cr.tensor(np.arange(5.0)), 12, mode=mode, **kw), np.pad(np.arange(5.0), 12, mode=mode, **kw),
             atol=1e-13)
    check_grad(lambda t: cr.pad(t, ((1, 7), (9, 2)), mode=mode, **kw), X)


def test_pad_refuses_what_numpy_refuses():
    with pytest.raises(ValueError, match="unsupported keyword"):
        cr.pad(cr.tensor(X), 1, mode="edge", constant_values=3)
    with pytest.raises(ValueError, match="empty"):
        cr.pad(cr.tensor(X), 1, mode="empty")
    with pytest.raises(ValueError, match="empty axis"):
        cr.pad(cr.tensor(np.zeros((0, 2))), 1, mode="edge")
    same(np.pad(cr.tensor(np.arange(6).reshape(2, 3)), 2, mode="mean"), np.pad(np.arange(6).reshape(2, 3), 2,
                                                                                mode="mean"))


# ----- every keyword of every dispatched NumPy function -----
def _dispatched():
    seen = set()
    for table in (cr.numpy._FUNCTIONS,):
        for func in table:
            name = func.__name__
            if getattr(np, name, None) is func and name not in seen and name not in coverage._WRAPPED:
                seen.add(name)
                yield name, func


@pytest.mark.parametrize("name, func", list(_dispatched()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_keyword_at_its_default_is_accepted(name, func):
    args = coverage._sample_args(name, func, floats=False)
    if args is None:
        pytest.skip(f"no sample arguments for numpy.{name}")
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        pytest.skip("no signature")
    tensors = _as_tensors(args)
    bound = sig.bind_partial(*args).arguments
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) or p.default is p.empty or p.name in bound:
            continue
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                func(*tensors, **{p.name: p.default})
        except cr.ChainruleError:
            pass                       # refused by name: allowed
        except TypeError as e:
            pytest.fail(f"numpy.{name}(..., {p.name}={p.default!r}) on Tensors: generic TypeError {e}")


def _as_tensors(tree):
    if isinstance(tree, np.ndarray) and tree.dtype.kind == "f":
        return cr.tensor(tree, requires_grad=True)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_as_tensors(t) for t in tree)
    return tree


def test_a_keyword_chainrule_lacks_is_refused_by_name():
    with pytest.raises(UnsupportedArgument, match="order='F'"):
        np.reshape(cr.tensor(X), (4, 3), order="F")
    with pytest.raises(TypeError, match="out="):
        np.sum(cr.tensor(X), out=np.zeros(()))
    same(np.clip(cr.tensor(X), min=-0.5, max=0.5), np.clip(X, min=-0.5, max=0.5))      # NumPy 2's names
    same(np.std(cr.tensor(X), correction=1), np.std(X, correction=1))
    same(np.sum(cr.tensor(X), 0, None, None, True), np.sum(X, 0, None, None, True))    # positional order


# ----- ufunc methods -----
def test_add_at_accumulates_in_place_and_is_differentiable():
    base = np.zeros((3, 4))
    idx = ([0, 0, 2], [1, 1, 3])
    v = np.array([1.0, 2.0, 3.0])
    want = base.copy()
    np.add.at(want, idx, v)
    t = cr.tensor(base)
    vt = cr.tensor(v, requires_grad=True)
    assert np.add.at(t, idx, vt) is None
    same(t, want)
    (t * cr.tensor(X)).sum().backward()
    same(vt.grad, X[idx])
    check_grad(lambda a, b: _added(np.add, a, idx, b), X, v)
    check_grad(lambda a, b: _added(np.subtract, a, idx, b), X, v)
    check_grad(lambda a, b: _added(np.multiply, a, ([0, 1], [2, 2]), b[:2]), X, v)


def _added(ufunc, a, idx, b):
    a = a * 1.0                                   # (not a leaf)
    ufunc.at(a, idx, b)
    return a


def test_ufunc_at_forms_match_numpy():
    for ufunc, idx, v in ((np.add, [0, 0, 1], 2.0), (np.subtract, (slice(None), [1, 1]), np.arange(3.0)[:, None]),
                          (np.multiply, [2, 0], 3.0), (np.maximum, [1], np.ones(4)), (np.negative, [0, 2], None)):
        want, t = X.copy(), cr.tensor(X.copy())
        rest = () if v is None else (v,)
        ufunc.at(want, idx, *rest)
        ufunc.at(t, idx, *rest)
        same(t, want)


def test_ufunc_at_refusals():
    leaf = cr.tensor(X, requires_grad=True)
    with pytest.raises(cr.GraphError, match="leaf"):
        np.add.at(leaf, [0], 1.0)
    with pytest.raises(UnsupportedArgument, match="repeated"):
        np.divide.at(cr.tensor(X), [0, 0], 2.0)
    with pytest.raises(UnsupportedArgument, match="NumPy array"):
        np.add.at(np.zeros(3), [0], cr.tensor([1.0], requires_grad=True))


@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum, np.minimum])
def test_reduce_reduceat_accumulate_outer(ufunc):
    for kw in ({}, {"axis": 1}, {"axis": None}, {"axis": (0, 1), "keepdims": True}, {"axis": 0, "keepdims": True}):
        same(ufunc.reduce(cr.tensor(X), **kw), ufunc.reduce(X, **kw))
    same(ufunc.reduce(cr.tensor(X), axis=1, initial=0.5, where=MASK), ufunc.reduce(X, axis=1, initial=0.5, where=MASK))
    same(ufunc.reduce(cr.tensor(X), 1, None, None, True), ufunc.reduce(X, 1, None, None, True))
    same(ufunc.reduceat(cr.tensor(X), [0, 2, 1, 3], axis=1), ufunc.reduceat(X, [0, 2, 1, 3], axis=1))
    same(ufunc.reduceat(cr.tensor(X), [0, 2]), ufunc.reduceat(X, [0, 2]))
    same(ufunc.outer(cr.tensor(X[0]), cr.tensor(X)), ufunc.outer(X[0], X))
    check_grad(lambda t: ufunc.reduce(t, axis=1), X)
    check_grad(lambda t: ufunc.reduceat(t, [0, 2, 1, 3], axis=1), X)
    check_grad(lambda t, u: ufunc.outer(t, u), X[0], X[1])
    for kw in ({}, {"axis": 1}, {"dtype": np.float32}):
        same(ufunc.accumulate(cr.tensor(X), **kw), ufunc.accumulate(X, **kw), rtol=1e-6)
    check_grad(lambda t: ufunc.accumulate(t, axis=1), X)


def test_outer_of_every_binary_ufunc_broadcasts():
    a, b = np.array([0.3, 0.6]), np.array([[0.2, 0.5, 0.9]])
    for ufunc in (np.subtract, np.divide, np.power, np.arctan2, np.hypot, np.less):
        same(ufunc.outer(cr.tensor(a), cr.tensor(b)), ufunc.outer(a, b))


def test_other_methods_raise_a_clear_error_when_grad_is_needed():
    with pytest.raises(UnsupportedArgument, match=r"numpy\.hypot\.reduce"):
        np.hypot.reduce(cr.tensor(X, requires_grad=True))
    same(np.hypot.reduce(cr.tensor(X)), np.hypot.reduce(X))            # no grad: NumPy's result
    same(np.logical_or.reduce(cr.tensor(X, requires_grad=True) > 0), np.logical_or.reduce(X > 0))


def test_ufunc_keywords():
    same(np.exp(cr.tensor(X), dtype=np.float32), np.exp(X, dtype=np.float32), rtol=1e-6)
    same(np.add(cr.tensor(X), 1.0, casting="same_kind", order="K"), np.add(X, 1.0))
    with pytest.raises(UnsupportedArgument, match="where"):
        np.exp(cr.tensor(X), where=MASK)
    with pytest.raises(TypeError, match="out="):
        np.exp(cr.tensor(X), out=np.zeros((3, 4)))


# ----- (b) and (c): NumPy on the data -----
def test_non_differentiable_and_non_math_functions_run_on_the_data():
    x = cr.tensor(X, requires_grad=True)
    for name, call in [("argwhere", lambda: np.argwhere(x > 0)), ("isclose", lambda: np.isclose(x, x)),
                       ("searchsorted", lambda: np.searchsorted(cr.tensor(np.sort(X[0]), requires_grad=True), 0.1)),
                       ("digitize", lambda: np.digitize(x, [0.0, 0.5])), ("signbit", lambda: np.signbit(x)),
                       ("count_nonzero", lambda: np.count_nonzero(x)), ("shape", lambda: np.shape(x)),
                       ("result_type", lambda: np.result_type(x, np.float32)), ("ndim", lambda: np.ndim(x)),
                       ("array2string", lambda: np.array2string(x)), ("can_cast", lambda: np.can_cast(x, np.int8)),
                       ("lexsort", lambda: np.lexsort((x[0], x[1])))]:
        assert cr.numpy.numpy_class(getattr(np, name)) in "bc", name
        got = call()
        data = {"argwhere": np.argwhere(X > 0), "isclose": np.isclose(X, X), "shape": (3, 4), "ndim": 2,
                "result_type": np.float64, "array2string": np.array2string(X), "signbit": np.signbit(X)}
        if name in data:
            got = got.data if isinstance(got, cr.Tensor) else got
            np.testing.assert_array_equal(got, data[name])


def test_missing_math_still_refuses_a_grad_input(monkeypatch):
    monkeypatch.delitem(cr.numpy._FUNCTIONS, np.kron, raising=False)
    x = cr.tensor(np.eye(2), requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.kron has no differentiable"):
        np.kron(x, x)
    np.testing.assert_array_equal(np.kron(x.detach(), x.detach()), np.kron(np.eye(2), np.eye(2)))
    assert cr.numpy.numpy_class(np.kron) == "a" and cr.numpy.numpy_class("save") == "c"
