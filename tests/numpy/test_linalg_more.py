"""chainrule.numpy.linalg_more (matrix_power, multi_dot, tensorsolve, tensorinv and NumPy 2's array-API
linalg members): NumPy's values, dtypes and shapes; both modes against central differences (complex
data through view_as_complex/view_as_real); second order; PyTorch's gradients; clear errors."""
import numpy as np
import pytest

import chainrule as cr
import chainrule.numpy.linalg_more as L

RNG = np.random.default_rng(0)


def _arr(*shape, c=False):
    x = RNG.normal(size=shape)
    return x + 1j * RNG.normal(size=shape) if c else x


def _mat(*shape, c=False):
    """Well conditioned: I + 0.3 * noise (batched over leading axes)."""
    return np.eye(shape[-1]) + 0.3 * _arr(*shape, c=c)


def _mp(n):
    return (lambda m, a: m.matrix_power(a, n)), (lambda t, a: t.linalg.matrix_power(a, n))


def _md(m, *xs):
    return m.multi_dot(list(xs))


def _t_md(t, *xs):
    return t.linalg.multi_dot(list(xs))


# (id, call on a module with numpy.linalg's API, torch version or None, inputs)
CASES = [
    *[(f"matrix_power{n}", *_mp(n), [_mat(2, 3, 3)]) for n in (2, 3, 5, 13, 1, -1, -3, -6)],
    ("matrix_power5-complex", *_mp(5), [_mat(2, 3, 3, c=True)]),
    ("matrix_power-2-complex", *_mp(-2), [_mat(3, 3, c=True)]),
    ("multi_dot3-left", _md, _t_md, [_arr(6, 2), _arr(2, 5), _arr(5, 3)]),
    ("multi_dot3-right", _md, _t_md, [_arr(2, 5), _arr(5, 3), _arr(3, 6)]),
    ("multi_dot4", _md, _t_md, [_arr(4, 6), _arr(6, 2), _arr(2, 5), _arr(5, 3)]),
    ("multi_dot6-vectors", _md, _t_md, [_arr(5), _arr(5, 7), _arr(7, 2), _arr(2, 6), _arr(6, 4), _arr(4)]),
    ("multi_dot4-row", _md, _t_md, [_arr(3), _arr(3, 4), _arr(4, 2), _arr(2, 5)]),
    ("multi_dot3-column", _md, _t_md, [_arr(3, 4), _arr(4, 2), _arr(2)]),
    ("multi_dot2-batched", _md, None, [_arr(2, 3, 4), _arr(4, 2)]),
    ("multi_dot4-complex", _md, _t_md, [_arr(2, 3, c=True), _arr(3, 4, c=True), _arr(4, 2), _arr(2, c=True)]),
    ("tensorsolve", lambda m, a, b: m.tensorsolve(a, b), lambda t, a, b: t.linalg.tensorsolve(a, b),
     [_mat(6, 6).reshape(6, 2, 3), _arr(6)]),
    ("tensorsolve-axes", lambda m, a, b: m.tensorsolve(a, b, axes=(0, 2)),
     lambda t, a, b: t.linalg.tensorsolve(a, b, dims=(0, 2)), [_mat(6, 6).reshape(2, 3, 3, 2), _arr(3, 2)]),
    ("tensorsolve-complex", lambda m, a, b: m.tensorsolve(a, b), lambda t, a, b: t.linalg.tensorsolve(a, b),
     [_mat(6, 6, c=True).reshape(2, 3, 2, 3), _arr(2, 3, c=True)]),
    ("tensorinv1", lambda m, a: m.tensorinv(a, ind=1), lambda t, a: t.linalg.tensorinv(a, ind=1),
     [_mat(6, 6).reshape(6, 2, 3)]),
    ("tensorinv2-complex", lambda m, a: m.tensorinv(a), lambda t, a: t.linalg.tensorinv(a),
     [_mat(6, 6, c=True).reshape(2, 3, 3, 2)]),
    ("matrix_transpose", lambda m, x: m.matrix_transpose(x), lambda t, x: x.mT, [_arr(2, 3, 4, c=True)]),
    ("outer", lambda m, x, y: m.outer(x, y), lambda t, x, y: t.outer(x, y), [_arr(3), _arr(4, c=True)]),
    ("cross", lambda m, x, y: m.cross(x, y), lambda t, x, y: t.linalg.cross(x, y), [_arr(4, 3), _arr(4, 3)]),
    ("cross-broadcast", lambda m, x, y: m.cross(x, y), lambda t, x, y: t.linalg.cross(x, y),
     [_arr(2, 1, 3), _arr(1, 5, 3)]),
    ("cross-axis0-complex", lambda m, x, y: m.cross(x, y, axis=0), lambda t, x, y: t.linalg.cross(x, y, dim=0),
     [_arr(3, 4, c=True), _arr(3, 4)]),
    ("vecdot", lambda m, x, y: m.vecdot(x, y), lambda t, x, y: t.linalg.vecdot(x, y), [_arr(3, 4), _arr(4)]),
    ("vecdot-axis0-complex", lambda m, x, y: m.vecdot(x, y, axis=0), lambda t, x, y: t.linalg.vecdot(x, y, dim=0),
     [_arr(4, 3, c=True), _arr(4, 3, c=True)]),
    ("vecdot-axis0-broadcast", lambda m, x, y: m.vecdot(x, y, axis=0), None, [_arr(4, 3), _arr(4, 2, 3)]),
    ("trace", lambda m, x: m.trace(x), lambda t, x: t.diagonal(x, 0, -2, -1).sum(-1), [_arr(2, 3, 4)]),
    ("trace-offset-complex", lambda m, x: m.trace(x, offset=-1),
     lambda t, x: t.diagonal(x, -1, -2, -1).sum(-1), [_arr(2, 4, 3, c=True)]),
    ("diagonal-offset", lambda m, x: m.diagonal(x, offset=1), lambda t, x: t.linalg.diagonal(x, offset=1),
     [_arr(2, 3, 4)]),
    ("tensordot", lambda m, x, y: m.tensordot(x, y), lambda t, x, y: t.tensordot(x, y),
     [_arr(2, 3, 4), _arr(3, 4, 5, c=True)]),
    ("tensordot-pairs", lambda m, x, y: m.tensordot(x, y, axes=([0], [1])),
     lambda t, x, y: t.tensordot(x, y, dims=([0], [1])), [_arr(3, 4), _arr(2, 3)]),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name, call, tcall, xs", CASES, ids=IDS)
def test_values_dtypes_and_shapes_match_numpy(name, call, tcall, xs):
    want = np.asarray(call(np.linalg, *xs))
    got = call(L, *[cr.tensor(x) for x in xs])
    assert isinstance(got, cr.Tensor)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.data, want, rtol=1e-12, atol=1e-12)
    plain = call(L, *xs)                          # ndarrays in, ndarrays out (no Tensor)
    assert not isinstance(plain, cr.Tensor)
    np.testing.assert_allclose(plain, want, rtol=1e-12, atol=1e-12)


def _pairs(x):
    return np.stack([x.real, x.imag], -1) if np.iscomplexobj(x) else x


def _real_map(call, xs):
    """The function as a map of real arrays (complex inputs and outputs as (..., 2) pairs)."""
    kinds = [np.iscomplexobj(x) for x in xs]

    def fn(*ps):
        out = call(L, *[cr.view_as_complex(p) if k else p for p, k in zip(ps, kinds)])
        return cr.view_as_real(out) if out.dtype.kind == "c" else out
    return fn


@pytest.mark.parametrize("name, call, tcall, xs", CASES, ids=IDS)
def test_both_modes_and_second_order_match_central_differences(name, call, tcall, xs):
    ps = [cr.tensor(_pairs(x), requires_grad=True) for x in xs]
    fn = _real_map(call, xs)
    assert cr.gradcheck(fn, ps, modes=("rev", "fwd"))
    assert cr.gradgradcheck(lambda *q: fn(*q) * fn(*q), ps)


@pytest.mark.parametrize("name, call, tcall, xs", [c for c in CASES if c[2] is not None],
                         ids=[c[0] for c in CASES if c[2] is not None])
def test_values_and_gradients_match_torch(name, call, tcall, xs):
    torch = pytest.importorskip("torch")
    want = np.asarray(call(np.linalg, *xs))
    w = _arr(*want.shape, c=want.dtype.kind == "c")
    zs = [cr.tensor(x, requires_grad=True) for x in xs]
    out = call(L, *zs)
    (out * cr.tensor(w)).real.sum().backward()
    ts = [torch.tensor(x, requires_grad=True) for x in xs]
    if any(np.iscomplexobj(x) for x in xs) and name.startswith(("tensor", "multi_dot", "cross", "vecdot")):
        # torch's linalg wants one dtype: promote the real inputs (their grads stay real below)
        tin = [t if t.is_complex() else t.to(torch.complex128) for t in ts]
    else:
        tin = ts
    tout = tcall(torch, *tin)
    np.testing.assert_allclose(out.data, tout.detach().resolve_conj().numpy(), rtol=1e-10, atol=1e-12)
    (tout * torch.tensor(w)).real.sum().backward()
    for z, t in zip(zs, ts):
        want_grad = t.grad.resolve_conj().numpy()
        assert z.grad.dtype == want_grad.dtype and z.grad.shape == want_grad.shape
        np.testing.assert_allclose(z.grad.data, want_grad, rtol=1e-9, atol=1e-11)


# ----- dtypes other than float64/complex128, and NumPy's special cases -----
INT = RNG.integers(-3, 4, size=(2, 3, 3))
DTYPE_CASES = [
    ("matrix_power0-int", lambda m, a: m.matrix_power(a, 0), [INT]),
    ("matrix_power1-int", lambda m, a: m.matrix_power(a, 1), [INT]),
    ("matrix_power4-int", lambda m, a: m.matrix_power(a, 4), [INT]),
    ("matrix_power-1-int", lambda m, a: m.matrix_power(a + 10 * np.eye(3, dtype=int), -1), [INT]),
    ("matrix_power0-complex64", lambda m, a: m.matrix_power(a, 0), [_mat(3, 3, c=True).astype(np.complex64)]),
    ("matrix_power-5-float32", lambda m, a: m.matrix_power(a, -5), [_mat(4, 4).astype(np.float32)]),
    ("multi_dot-float32", _md, [_arr(3).astype(np.float32), _arr(3, 4).astype(np.float32), _arr(4, 2)]),
    ("tensorinv-float32", lambda m, a: m.tensorinv(a, ind=1), [_mat(4, 4).reshape(4, 2, 2).astype(np.float32)]),
    ("vecdot-int32", lambda m, x, y: m.vecdot(x, y), [INT.astype(np.int32), INT[0].astype(np.int32)]),
    ("trace-int32", lambda m, x: m.trace(x), [INT.astype(np.int32)]),
    ("trace-int32-to-float32", lambda m, x: m.trace(x, dtype=np.float32), [INT.astype(np.int32)]),
    ("trace-int64-to-int8", lambda m, x: m.trace(x, offset=1, dtype=np.int8), [INT]),
    ("cross-int", lambda m, x, y: m.cross(x, y), [INT, INT[::-1]]),
    ("outer-int-float32", lambda m, x, y: m.outer(x, y), [INT[0, 0], _arr(2).astype(np.float32)]),
    ("diagonal-int", lambda m, x: m.diagonal(x, offset=-1), [INT]),
]


@pytest.mark.parametrize("name, call, xs", DTYPE_CASES, ids=[c[0] for c in DTYPE_CASES])
def test_other_dtypes_match_numpy(name, call, xs):
    want = np.asarray(call(np.linalg, *xs))
    got = call(L, *[cr.tensor(x) for x in xs])
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-5 if want.dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(got.data, want, rtol=tol, atol=tol)


def test_products_run_in_numpys_order():
    # the same matmuls in the same order: bit-for-bit NumPy's values
    a = _mat(2, 5, 5)
    for n in (2, 3, 6, 11, -7):
        np.testing.assert_array_equal(L.matrix_power(cr.tensor(a), n).data, np.linalg.matrix_power(a, n))
    xs = [_arr(9), _arr(9, 2), _arr(2, 8), _arr(8, 3), _arr(3, 7), _arr(7, 7), _arr(7, 2)]
    np.testing.assert_array_equal(L.multi_dot([cr.tensor(x) for x in xs]).data, np.linalg.multi_dot(xs))


def test_multi_dot_takes_the_cheapest_parenthesisation():
    # (10x100)(100x5)(5x50)(50x1): optimal ((A(B(CD)))) costs 5*50 + 100*5 + 10*100 = 1750 multiply-adds,
    # left to right 10*100*5 + 10*5*50 + 10*50 = 8000
    shapes = [(10, 100), (100, 5), (5, 50), (50, 1)]
    xs = [cr.tensor(_arr(*s)) for s in shapes]
    with cr.profile() as p:
        L.multi_dot(xs)
    assert p.forward_flops == 2 * 1750
    order = np.linalg._linalg._multi_dot_matrix_chain_order([np.empty(s) for s in shapes])
    assert (np.asarray(L._chain_order(shapes))[np.triu_indices(4, 1)] == order[np.triu_indices(4, 1)]).all()


def test_matrix_power_zero_is_the_identity_with_a_zero_gradient():
    a = cr.tensor(np.array([[np.nan, 2.0], [np.inf, 1.0]]), requires_grad=True)
    out = L.matrix_power(a, 0)
    assert out.requires_grad                              # as PyTorch: part of the graph, gradient 0
    np.testing.assert_array_equal(out.data, np.eye(2))
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.data, np.zeros((2, 2)))
    b = cr.tensor(_mat(2, 3, 3, c=True))
    assert L.matrix_power(b, 0).shape == (2, 3, 3) and L.matrix_power(b, 0).dtype == cr.complex128


def test_matrix_power_one_is_a_new_tensor():
    a = cr.tensor(_mat(3, 3), requires_grad=True)
    out = L.matrix_power(a, 1)
    assert out is not a and not np.shares_memory(out.data, a.data)
    (out * 2.0).sum().backward()
    np.testing.assert_array_equal(a.grad.data, np.full((3, 3), 2.0))


def test_matrix_power_third_derivative():
    # d^3/dx^3 tr(x^4) along the identity direction: 24 x tr(I) for the scalar path x(s) = s I
    s = cr.tensor(1.5, requires_grad=True)
    y = L.trace(L.matrix_power(s * cr.tensor(np.eye(3)), 4))
    (d1,) = cr.autograd.grad(y, [s], create_graph=True)
    (d2,) = cr.autograd.grad(d1, [s], create_graph=True)
    (d3,) = cr.autograd.grad(d2, [s])
    assert float(d3.data) == pytest.approx(24 * 1.5 * 3)


def test_lists_are_accepted():
    xs = [[1.0, 2.0], [[1.0, 0.5], [0.0, 2.0]], [[3.0], [4.0]]]
    got = L.multi_dot(xs)
    np.testing.assert_allclose(np.asarray(got), np.linalg.multi_dot([np.array(x) for x in xs]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(L.matrix_power([[2.0, 0.0], [0.0, 3.0]], -1)), [[0.5, 0], [0, 1 / 3]],
                               rtol=1e-6)


ERRORS = [
    (lambda: L.matrix_power(cr.tensor(np.ones((2, 3, 4))), 2), cr.ShapeError, r"matrix_power.*square.*\(2, 3, 4\)"),
    (lambda: L.matrix_power(cr.tensor(np.ones(3)), 2), cr.ShapeError, r"matrix_power.*\(3,\)"),
    (lambda: L.matrix_power(cr.tensor(np.eye(2)), 2.5), TypeError, "matrix_power.*integer.*2.5"),
    (lambda: L.matrix_power(cr.tensor(np.zeros((2, 2))), -1), cr.errors.LinAlgError,
     r"matrix_power\(a, -1\): inv: the matrix is singular"),
    (lambda: L.matrix_power(cr.tensor(np.eye(2, dtype=np.float16)), -1), cr.DTypeError,
     r"matrix_power\(a, -1\): inv.*float16.*float32"),
    (lambda: L.tensorsolve(np.zeros((2, 2)), np.ones(2)), cr.errors.LinAlgError, "tensorsolve: solve.*singular"),
    (lambda: L.tensorinv(np.zeros((2, 2)), ind=1), cr.errors.LinAlgError, "tensorinv: inv.*singular"),
    (lambda: L.multi_dot([cr.tensor(np.eye(2))]), cr.ShapeError, "multi_dot.*at least two"),
    (lambda: L.multi_dot([np.eye(2), np.ones((2, 2, 2)), np.eye(2)]), cr.ShapeError,
     r"multi_dot: operand 1 is 3-dimensional \(shape \(2, 2, 2\)\)"),
    (lambda: L.multi_dot([np.eye(2), np.ones((3, 2)), np.eye(2)]), cr.ShapeError,
     r"multi_dot: operands 0 and 1 are not aligned.*\(2, 2\).*\(3, 2\)"),
    (lambda: L.multi_dot([np.eye(2), np.eye(2)], out=np.eye(2)), TypeError, "multi_dot: out="),
    (lambda: L.tensorsolve(np.ones((6, 2, 3)), np.ones(5)), cr.ShapeError, r"tensorsolve.*\(6, 2, 3\).*\(5,\)"),
    (lambda: L.tensorinv(np.ones((6, 2, 3)), ind=0), ValueError, "tensorinv: ind must be a positive"),
    (lambda: L.tensorinv(np.ones((6, 2, 2)), ind=1), cr.ShapeError, r"tensorinv.*\(6, 2, 2\).*6.*4"),
    (lambda: L.matrix_transpose(cr.tensor(np.ones(3))), cr.ShapeError, r"matrix_transpose.*\(3,\)"),
    (lambda: L.outer(np.ones((2, 2)), np.ones(2)), cr.ShapeError, r"outer.*one-dimensional.*\(2, 2\)"),
    (lambda: L.cross(np.ones((2, 3)), np.ones((2, 2))), cr.ShapeError, "cross.*3-vectors.*3 and 2"),
    (lambda: L.cross(np.ones(3), np.ones(3), axis=1), cr.ShapeError, "cross: axis 1 is out of range"),
    (lambda: L.vecdot(np.ones((2, 3)), np.ones(4)), cr.ShapeError, r"vecdot.*\(2, 3\).*\(4,\).*3 != 4"),
    (lambda: L.trace(np.ones(3)), cr.ShapeError, r"trace.*\(3,\)"),
    (lambda: L.diagonal(np.ones(3)), cr.ShapeError, r"diagonal.*\(3,\)"),
]


@pytest.mark.parametrize("call, exc, match", ERRORS, ids=[f"error{i}" for i in range(len(ERRORS))])
def test_clear_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_numpy_raises_the_same_kinds_of_errors():
    # chainrule's ShapeError is a ValueError, like NumPy's LinAlgError: code catching ValueError works for both
    for fn in (lambda m: m.matrix_power(np.ones((2, 3)), 2), lambda m: m.tensorinv(np.ones((6, 2, 2)), ind=1),
               lambda m: m.outer(np.ones((2, 2)), np.ones(2)), lambda m: m.cross(np.ones(3), np.ones(2))):
        for m in (np.linalg, L):
            with pytest.raises(ValueError):
                fn(m)


def test_solve_of_a_batch_of_matrices_and_one_vector_has_exact_gradients():
    # b 1-D with a batched a of as many matrices as rows: the result (n, n) must still be read as
    # a batch of vectors by the rules (NumPy 2's rule: only a 1-D b is a vector)
    rng = np.random.default_rng(0)
    a = cr.tensor(rng.standard_normal((3, 3, 3)) + 3 * np.eye(3), requires_grad=True)
    b = cr.tensor(rng.standard_normal(3), requires_grad=True)
    assert cr.gradcheck(cr.linalg.solve, (a, b))
    assert cr.gradgradcheck(cr.linalg.solve, (a, b))


# ----- values a decomposition cannot take: NumPy's LinAlgError, saying what is wrong -----
NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])
SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
WITH_NAN = np.array([[1.0, np.nan], [0.0, 1.0]])
WITH_INF = np.array([[1.0, np.inf], [0.0, 1.0]])
VALUE_ERRORS = [
    ("cholesky", lambda m, a: m.cholesky(a), NOT_PD, "not positive definite.*jitter"),
    ("cholesky", lambda m, a: m.cholesky(a), SINGULAR, "not positive definite"),
    ("inv", lambda m, a: m.inv(a), SINGULAR, "singular.*pinv"),
    ("solve", lambda m, a: m.solve(a, np.ones(2)), SINGULAR, r"singular \(Singular matrix\) for inputs \(2, 2\)"),
    ("svd", lambda m, a: m.svd(a), WITH_NAN, "input 0 contains NaN"),
    ("eigvals", lambda m, a: m.eigvals(a), WITH_INF, "input 0 contains inf"),
    ("eigvals", lambda m, a: m.eigvals(a), WITH_NAN, "contains NaN"),
    ("tensorinv", lambda m, a: m.tensorinv(a, ind=1), SINGULAR, "singular"),
    ("tensorsolve", lambda m, a: m.tensorsolve(a, np.ones(2)), SINGULAR, "singular"),
    ("matrix_power", lambda m, a: m.matrix_power(a, -2), SINGULAR, "singular"),
    ("pinv", lambda m, a: m.pinv(a), WITH_NAN, "contains NaN"),
]


@pytest.mark.parametrize("name, call, a, match", VALUE_ERRORS, ids=[f"{v[0]}-{i}" for i, v in enumerate(VALUE_ERRORS)])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_bad_values_raise_numpys_linalgerror_saying_what_is_wrong(name, call, a, match, requires_grad):
    with pytest.raises(np.linalg.LinAlgError):
        with np.errstate(all="ignore"):
            call(np.linalg, a)                       # NumPy's contract
    t = cr.tensor(a, requires_grad=requires_grad)
    for m in (np.linalg, cr.linalg):                 # np.linalg.<f>(tensor) dispatches to cr.linalg.<f>
        with pytest.raises(cr.errors.LinAlgError, match=f"{name}.*{match}") as info:
            with np.errstate(all="ignore"):
                call(m, t)
        assert isinstance(info.value, np.linalg.LinAlgError) and isinstance(info.value, cr.ChainruleError)
        assert not isinstance(info.value, cr.ShapeError)


def test_linalgerror_lets_user_code_add_jitter():
    a = cr.tensor(np.array([[1.0, 1.0], [1.0, 1.0]]), requires_grad=True)      # PSD, singular

    def chol(a):
        try:
            return cr.linalg.cholesky(a)
        except np.linalg.LinAlgError:
            return cr.linalg.cholesky(a + 1e-6 * np.eye(2))
    l = chol(a)
    np.testing.assert_allclose((l @ l.T).data, a.data + 1e-6 * np.eye(2), atol=1e-12)
    l.sum().backward()
    assert np.isfinite(a.grad.data).all()


def test_linalgerror_inside_vmap_and_batches():
    with pytest.raises(cr.errors.LinAlgError, match="singular"):
        cr.vmap(cr.linalg.inv)(np.stack([np.eye(2), SINGULAR]))
    with pytest.raises(cr.errors.LinAlgError, match=r"not positive definite.*\(3, 2, 2\)"):
        cr.linalg.cholesky(cr.tensor(np.stack([np.eye(2), NOT_PD, np.eye(2)])))
