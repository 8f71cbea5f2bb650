"""chainrule.numpy.decompositions: eig, eigvals, qr, matrix_exp, solve_triangular, cho_solve, and the
complex slogdet/cholesky; plus complex checks of linalg's inv, solve, det.

The op-table rows (op_specs_decompositions.SPECS / COMPLEX_SPECS) run here through the same checks as
the op table (central differences in both modes, second order, PyTorch); the tests below add
NumPy/SciPy's exact values, dtypes and result types, batching, gauge-invariant losses, and the
clear errors where a derivative does not exist.
"""
import numpy as np
import pytest
import scipy.linalg

import chainrule as cr
from chainrule.ops import decompositions as D
from tests.op_specs.decompositions import COMPLEX_SPECS, SPECS

torch = pytest.importorskip("torch")


def _crandn(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _complex_input(data):
    """A complex128 leaf fed through view_as_complex of real (..., 2) pairs (as test_fft does)."""
    pairs = cr.tensor(np.stack([data.real, data.imag], -1), requires_grad=True)
    return pairs, cr.view_as_complex(pairs)


def _grads(fn, datas, v):
    """(value, gradients) from chainrule and from torch for the cotangent v."""
    xs = [cr.tensor(d, requires_grad=True) for d in datas]
    out = fn(cr, *xs)
    out.backward(cr.tensor(v))
    txs = [torch.tensor(d, requires_grad=True) for d in datas]
    tout = fn(torch, *txs)
    tout.backward(torch.tensor(v))
    return (out.data, tout.detach().numpy()), [(x.grad.data, t.grad.numpy()) for x, t in zip(xs, txs)]


def _close(pairs, rtol=1e-9, atol=1e-11):
    for a, b in pairs:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ----- the op-table rows -----
@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_rows_gradcheck_both_modes_and_second_order(spec, rng):
    xs = spec.sample(rng)
    assert cr.gradcheck(spec.fn, xs, modes=("rev", "fwd"))
    if spec.order >= 2:
        assert cr.gradgradcheck(spec.fn, spec.sample(rng))


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_rows_match_torch(spec, rng):
    xs = spec.sample(rng)
    out = spec.fn(*xs)
    v = rng.standard_normal(out.shape)
    out.backward(cr.tensor(v))
    txs = [torch.tensor(x.data, requires_grad=True) for x in xs]
    tout = spec.torch_fn(*txs)
    tout.backward(torch.tensor(v))
    _close([(out.data, tout.detach().numpy())] + [(x.grad.data, t.grad.numpy()) for x, t in zip(xs, txs)])


@pytest.mark.parametrize("spec", COMPLEX_SPECS, ids=str)
def test_complex_rows_gradcheck_and_torch(spec, rng):
    xs = spec.sample(rng)
    assert cr.gradcheck(spec.fn, xs, modes=("rev", "fwd"))
    out = spec.fn(*xs)
    v = rng.standard_normal(out.shape) + (1j * rng.standard_normal(out.shape) if out.dtype.kind == "c" else 0)
    out.backward(cr.tensor(v))
    txs = [torch.tensor(x.data, requires_grad=True) for x in xs]
    tout = spec.torch_fn(*txs)
    tout.backward(torch.tensor(v))
    _close([(out.data, tout.detach().resolve_conj().numpy())]
           + [(x.grad.data, t.grad.resolve_conj().numpy()) for x, t in zip(xs, txs)])
    for x in xs:
        assert x.grad.dtype == x.dtype


def test_specs_name_primitives():
    names = {s.name for s in SPECS} | {s.name for s in COMPLEX_SPECS}
    assert names == {"eig", "eigvals", "qr", "matrix_exp", "solve_triangular", "logdet", "cholesky"}
    assert names <= set(cr.PRIMITIVES)
    assert all(cr.PRIMITIVES[n].complex is not None for n in names)


# ----- eig, eigvals -----
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_eig_values_types_and_batching_match_numpy(dtype, rng):
    a = rng.standard_normal((2, 3, 4, 4)).astype(dtype)
    w, v = D.eig(cr.tensor(a))
    ref = np.linalg.eig(a)
    cdtype = np.result_type(dtype, np.complex64)
    assert w.dtype == v.dtype == cdtype and w.shape == (2, 3, 4) and v.shape == (2, 3, 4, 4)
    np.testing.assert_array_equal(w.data, ref.eigenvalues.astype(cdtype))
    np.testing.assert_array_equal(v.data, ref.eigenvectors.astype(cdtype))
    res = D.eig(a)                                         # ndarrays in, ndarrays out
    assert type(res).__name__ == "EigResult" and res._fields == ("eigenvalues", "eigenvectors")
    assert isinstance(res.eigenvalues, np.ndarray)
    ev = D.eigvals(cr.tensor(a))
    assert ev.dtype == cdtype
    np.testing.assert_allclose(ev.data, ref.eigenvalues, rtol=1e-4 if dtype == np.float32 else 1e-12)


def test_eig_is_complex_even_for_real_eigenvalues():
    w, v = D.eig(cr.tensor(np.diag([1.0, 2.0])))
    assert w.dtype == v.dtype == cr.complex128


def test_eig_gauge_invariant_losses_match_torch(rng):
    a = _crandn(rng, 2, 4, 4)

    def loss(m, x):
        w, v = m.linalg.eig(x) if m is torch else D.eig(x)
        p = v[..., :, 1:2] @ (v[..., :, 1:2].conj().mT if m is torch else cr.conj(v[..., :, 1:2]).mT)
        quad = (v.conj().mT if m is torch else cr.conj(v).mT) @ x @ v        # v_i^H A v_i on the diagonal
        diag = m.diagonal(quad, 0, -2, -1)
        return (w ** 2).real.sum() + m.abs(diag).sum() + (p * p.conj()).real.sum() + m.abs(w).sum()
    value, grads = _grads(loss, [a], 1.0)
    _close([value] + grads)


def test_eig_of_real_input_gives_real_gradient(rng):
    a = rng.standard_normal((3, 3))
    x = cr.tensor(a, requires_grad=True)
    (cr.sum(cr.abs(D.eig(x).eigenvectors)) + cr.sum(cr.real(D.eig(x).eigenvalues) ** 3)).backward()
    t = torch.tensor(a, requires_grad=True)
    w, v = torch.linalg.eig(t)
    (v.abs().sum() + (w.real ** 3).sum()).backward()
    assert x.grad.dtype == cr.float64
    np.testing.assert_allclose(x.grad.data, t.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_eig_reconstruction_and_third_order(rng):
    a = rng.standard_normal((3, 3)) + np.diag([1.0, 2.0, 3.0])

    def f(x):
        w, v = D.eig(x)
        return cr.real(cr.sum((v * w[..., None, :]) @ cr.linalg.inv(v) * np.arange(9).reshape(3, 3)))
    x = cr.tensor(a, requires_grad=True)
    g, = cr.autograd.grad(f(x), [x], create_graph=True)
    np.testing.assert_allclose(g.data, np.arange(9).reshape(3, 3), atol=1e-10)   # V diag(w) V^-1 = A
    h, = cr.autograd.grad(cr.sum(g * g), [x], create_graph=True, allow_unused=True)
    assert h is None or np.allclose(h.data, 0, atol=1e-8)
    assert cr.gradgradcheck(lambda y: cr.abs(D.eig(y).eigenvectors) ** 2, [cr.tensor(a, requires_grad=True)])


def test_eig_phase_dependent_loss_raises(rng):
    x = cr.tensor(_crandn(rng, 3, 3), requires_grad=True)
    with pytest.raises(ValueError, match="phase"):
        cr.real(D.eig(x).eigenvectors[0, 0]).backward()
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):       # torch refuses the same loss
        t = torch.tensor(x.data, requires_grad=True)
        torch.linalg.eig(t)[1][0, 0].real.backward()


def test_eig_repeated_eigenvalues(rng):
    x = cr.tensor(np.eye(3), requires_grad=True)
    with pytest.raises(ValueError, match="repeated eigenvalues"):
        cr.sum(cr.abs(D.eig(x).eigenvectors) ** 2).backward()
    cr.sum(cr.real(D.eig(x).eigenvalues)).backward()         # eigenvalues alone: defined, trace's gradient
    np.testing.assert_allclose(x.grad.data, np.eye(3), atol=1e-12)
    with pytest.raises(ValueError, match="eigvals"):
        cr.jvp(lambda y: D.eig(y).eigenvalues, (cr.tensor(np.eye(3)),), (cr.tensor(rng.standard_normal((3, 3))),))
    t = rng.standard_normal((3, 3))
    _, tangent = cr.jvp(D.eigvals, (cr.tensor(np.eye(3)),), (cr.tensor(t),))
    assert np.isfinite(tangent.data).all() and np.isclose(tangent.data.sum(), np.trace(t))   # eigvals: defined


def test_eigvals_second_order_at_repeated_eigenvalues_refuses_with_advice_that_works(rng):
    # issue 26, item 11: the advice named eigvals itself; and reverse-over-reverse returned 0 silently
    e = np.array([[0.0, 1.0], [1.0, 0.0]])
    f = lambda t: cr.sum(cr.real(D.eigvals(np.eye(2) + t * e) ** 2))          # noqa: E731
    advice = r"eigvals: the second derivative .*repeated eigenvalues.*trace\(matrix_power\(A, k\)\).*eigvalsh"
    with pytest.raises(ValueError, match=advice):
        cr.grad(cr.grad(f))(cr.tensor(0.0))
    with pytest.raises(ValueError, match=advice):
        cr.hvp(lambda a: cr.sum(cr.real(D.eigvals(a) ** 2)), (np.eye(2),), (e,))
    # the advice: sum(lambda^2) = trace(A^2), and eigvalsh for this symmetric matrix, are exact there
    g = lambda t: cr.trace(cr.linalg.matrix_power(np.eye(2) + t * e, 2))       # noqa: E731
    assert float(cr.grad(cr.grad(g))(cr.tensor(0.0))) == pytest.approx(4.0)
    assert cr.hvp(lambda t: cr.sum(cr.linalg.eigvalsh(np.eye(2) + t * e) ** 2), (np.array(0.0),),
                  (np.array(1.0),))[0] == pytest.approx(4.0)
    # with distinct eigenvalues both modes are exact (2 tr(B^2))
    b = rng.standard_normal((2, 2))
    f2 = lambda t: cr.sum(cr.real(D.eigvals(np.diag([1.0, 2.0]) + t * b) ** 2))   # noqa: E731
    assert float(cr.grad(cr.grad(f2))(cr.tensor(0.0))) == pytest.approx(2 * np.trace(b @ b))


def test_eig_rejects_non_square():
    with pytest.raises(cr.ShapeError, match="square"):
        D.eig(cr.tensor(np.ones((2, 3))))


# ----- qr -----
@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_values_and_types_match_numpy(shape, mode, rng):
    a = rng.standard_normal(shape)
    got, ref = D.qr(cr.tensor(a), mode), np.linalg.qr(a, mode)
    if mode == "r":
        assert isinstance(got, cr.Tensor)
        np.testing.assert_array_equal(got.data, ref)
        return
    assert type(got).__name__ == "QRResult" and got._fields == ("Q", "R")
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_array_equal(g.data, r)


def test_qr_raw_mode_without_grad_only(rng):
    a = rng.standard_normal((4, 3))
    h, tau = D.qr(cr.tensor(a), "raw")
    np.testing.assert_array_equal(h.data, np.linalg.qr(a, "raw")[0])
    with pytest.raises(ValueError, match="raw"):
        D.qr(cr.tensor(a, requires_grad=True), "raw")
    with pytest.raises(ValueError, match="mode"):
        D.qr(cr.tensor(a), "full")


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 3, 3)])
def test_qr_complex_gradients_match_torch(shape, rng):
    a = _crandn(rng, *shape)
    vq = _crandn(rng, *shape[:-1], min(shape[-2:]))
    vr = _crandn(rng, *shape[:-2], min(shape[-2:]), shape[-1])

    def f(m, x):
        q, r = m.linalg.qr(x) if m is torch else D.qr(x)
        return (q * m.tensor(vq) if m is torch else q * vq).real.sum() + ((r * m.tensor(vr)) if m is torch
                                                                          else r * vr).real.sum()
    x = cr.tensor(a, requires_grad=True)
    f(cr, x).backward()
    t = torch.tensor(a, requires_grad=True)
    f(torch, t).backward()
    np.testing.assert_allclose(x.grad.data, t.grad.numpy(), rtol=1e-9, atol=1e-11)
    pairs, z = _complex_input(a)
    assert cr.gradcheck(lambda p: cr.view_as_real(cr.concatenate([cr.ravel(m) for m in D.qr(cr.view_as_complex(p))])),
                        [pairs], modes=("rev", "fwd"))


def test_qr_non_differentiable_cases_raise(rng):
    x = cr.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    with pytest.raises(ValueError, match="mode='complete'.*\\(4, 3\\)"):
        cr.sum(D.qr(x, "complete").Q).backward()
    with pytest.raises(ValueError, match="mode='complete'"):
        cr.jvp(lambda y: D.qr(y, "complete").R, (x.detach(),), (cr.tensor(np.ones((4, 3))),))
    d = cr.tensor(np.outer([1.0, 2.0, 3.0], [1.0, 1.0]), requires_grad=True)       # rank 1
    with pytest.raises(ValueError, match="rank-deficient"):
        cr.sum(D.qr(d, "r")).backward()


# ----- matrix_exp -----
def test_matrix_exp_values_match_scipy_and_batching(rng):
    a = rng.standard_normal((2, 3, 4, 4))
    out = D.matrix_exp(cr.tensor(a))
    np.testing.assert_array_equal(out.data, scipy.linalg.expm(a))
    np.testing.assert_allclose(out.data, torch.linalg.matrix_exp(torch.tensor(a)).numpy(), rtol=1e-12, atol=1e-12)
    c = _crandn(rng, 3, 3)
    assert D.matrix_exp(cr.tensor(c)).dtype == cr.complex128
    assert D.matrix_exp(cr.tensor(a.astype(np.float32))).dtype == cr.float32


def test_matrix_exp_complex_gradient_second_and_third_order(rng):
    a = _crandn(rng, 2, 3, 3) * 0.5
    v = _crandn(rng, 2, 3, 3)
    value, grads = _grads(lambda m, x: (m.linalg.matrix_exp(x) if m is torch else D.matrix_exp(x)), [a], v)
    _close([value] + grads)
    pairs, _ = _complex_input(a[0])
    assert cr.gradgradcheck(lambda p: cr.view_as_real(D.matrix_exp(cr.view_as_complex(p))), [pairs])
    # third order: d^3/dt^3 trace(expm(t A)) at t=0 = trace(A^3)
    t = cr.tensor(0.0, dtype=cr.float64, requires_grad=True)
    m = rng.standard_normal((3, 3)) * 0.5
    y = cr.trace(D.matrix_exp(t * m))
    for _ in range(3):
        y, = cr.autograd.grad(y, [t], create_graph=True)
    np.testing.assert_allclose(y.data, np.trace(m @ m @ m), rtol=1e-10)


# ----- solve_triangular, cho_solve -----
@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower,unit", [(True, False), (False, True)])
def test_solve_triangular_values_match_scipy(trans, lower, unit, rng):
    a = _crandn(rng, 2, 3, 3) + 3 * np.eye(3)
    for b in (_crandn(rng, 2, 3, 2), rng.standard_normal(3), rng.standard_normal((3, 4))):
        got = D.solve_triangular(cr.tensor(a), cr.tensor(b), trans=trans, lower=lower, unit_diagonal=unit)
        ref = scipy.linalg.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
        assert got.shape == ref.shape and got.dtype == ref.dtype
        np.testing.assert_array_equal(got.data, ref)


def test_solve_triangular_gradient_reads_only_the_triangle(rng):
    a = cr.tensor(rng.standard_normal((3, 3)) + 3 * np.eye(3), requires_grad=True)
    b = cr.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    cr.sum(D.solve_triangular(a, b, lower=True, unit_diagonal=True) ** 2).backward()
    assert np.all(np.triu(a.grad.data) == 0) and np.all(a.grad.data[np.tril_indices(3, -1)] != 0)
    # the other triangle and the diagonal do not change the result
    a2 = a.data + np.triu(rng.standard_normal((3, 3)))
    np.testing.assert_array_equal(D.solve_triangular(a2, b.data, lower=True, unit_diagonal=True),
                                  D.solve_triangular(a.data, b.data, lower=True, unit_diagonal=True))


def test_solve_triangular_errors():
    a = cr.tensor(np.eye(3))
    with pytest.raises(ValueError, match="trans"):
        D.solve_triangular(a, cr.ones(3), trans=3)
    with pytest.raises(cr.ShapeError, match="do not match"):
        D.solve_triangular(a, cr.ones((2, 2)))
    with pytest.raises(ValueError, match="solve_triangular.*(infs|NaN)"):
        D.solve_triangular(a, cr.tensor([np.nan, 0.0, 0.0]))


@pytest.mark.parametrize("lower", [True, False])
def test_cho_solve_matches_scipy_and_torch(lower, rng):
    z = _crandn(rng, 3, 3)
    spd = z @ z.conj().T + np.eye(3)
    c = np.linalg.cholesky(spd) if lower else np.linalg.cholesky(spd).conj().T
    c = c + (np.triu(_crandn(rng, 3, 3), 1) if lower else np.tril(_crandn(rng, 3, 3), -1))     # junk: unread
    b = _crandn(rng, 3, 2)
    np.testing.assert_allclose(D.cho_solve((cr.tensor(c), lower), cr.tensor(b)).data,
                               scipy.linalg.cho_solve((c, lower), b), rtol=1e-12)
    tri = np.tril if lower else np.triu
    v = _crandn(rng, 3, 2)
    value, grads = _grads(lambda m, cc, bb: (m.cholesky_solve(bb, m.tril(cc) if lower else m.triu(cc), upper=not lower)
                                             if m is torch else D.cho_solve((cc, lower), bb)), [c, b], v)
    _close([value] + grads)
    assert np.all(grads[0][0] == tri(grads[0][0]))


# ----- complex slogdet, cholesky; linalg's inv, solve, det on complex data -----
def test_slogdet_complex_matches_numpy_and_torch(rng):
    a = _crandn(rng, 2, 3, 3)
    sign, logabsdet = cr.linalg.slogdet(cr.tensor(a))
    ref = np.linalg.slogdet(a)
    assert sign.dtype == cr.complex128 and logabsdet.dtype == cr.float64
    np.testing.assert_array_equal(sign.data, ref.sign)
    np.testing.assert_array_equal(logabsdet.data, ref.logabsdet)
    vs, vl = _crandn(rng, 2), rng.standard_normal(2)

    def f(m, x):
        s, ld = m.linalg.slogdet(x) if m is torch else cr.linalg.slogdet(x)
        return (s * (m.tensor(vs).conj() if m is torch else np.conj(vs))).real.sum() + (ld * (
            m.tensor(vl) if m is torch else vl)).sum()
    value, grads = _grads(f, [a], 1.0)
    _close([value] + grads)
    z = cr.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]) + 0j, requires_grad=True)      # singular
    s, ld = cr.linalg.slogdet(z)
    assert s.data == 0 and np.isneginf(ld.data)
    with pytest.raises(ValueError, match="singular"):
        ld.backward()


def test_slogdet_real_input_is_linalgs(rng):
    a = rng.standard_normal((3, 3))
    got, ref = cr.linalg.slogdet(cr.tensor(a)), np.linalg.slogdet(a)
    assert got.sign.dtype == cr.float64
    np.testing.assert_array_equal(got.sign.data, ref.sign)


def test_cholesky_complex_and_upper(rng):
    z = _crandn(rng, 2, 3, 3)
    h = z @ np.conj(np.swapaxes(z, -1, -2)) + np.eye(3)
    np.testing.assert_array_equal(cr.linalg.cholesky(cr.tensor(h)).data, np.linalg.cholesky(h))
    np.testing.assert_array_equal(cr.linalg.cholesky(cr.tensor(h), upper=True).data, np.linalg.cholesky(h, upper=True))
    r = rng.standard_normal((3, 3))
    spd = r @ r.T + np.eye(3)
    np.testing.assert_array_equal(cr.cholesky(cr.tensor(spd), upper=True).data, np.linalg.cholesky(spd, upper=True))
    v = _crandn(rng, 2, 3, 3)
    value, grads = _grads(lambda m, x: m.linalg.cholesky(x @ x.mH) if m is torch else cr.cholesky(x @ cr.conj(x).mT),
                          [z], v)
    _close([value] + grads)


@pytest.mark.parametrize("name", ["inv", "solve", "det"])
def test_linalg_complex_batched_second_order_and_torch(name, rng):
    a = _crandn(rng, 2, 3, 3) * 0.3 + 2 * np.eye(3)
    b = _crandn(rng, 2, 3, 2)
    fns = {"inv": lambda m, x, y: m.linalg.inv(x) @ y, "solve": lambda m, x, y: m.linalg.solve(x, y),
           "det": lambda m, x, y: m.linalg.det(x)[..., None, None] * y}
    out = fns[name](cr, cr.tensor(a), cr.tensor(b))
    v = _crandn(rng, *out.shape)
    value, grads = _grads(fns[name], [a, b], v)
    _close([value] + grads)
    pa, _ = _complex_input(a[0])
    pb, _ = _complex_input(b[0])
    fn = fns[name]
    assert cr.gradgradcheck(lambda p, q: cr.view_as_real(fn(cr, cr.view_as_complex(p), cr.view_as_complex(q))),
                            [pa, pb])


def test_complex_det_gradient_at_a_singular_matrix_matches_torch(rng):
    a = _crandn(rng, 2, 3, 2) @ _crandn(rng, 2, 2, 3)                 # rank 2: the SVD path
    v = _crandn(rng, 2)
    value, grads = _grads(lambda m, x: m.linalg.det(x), [a], v)
    _close(grads, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("fn", [D.eig, D.eigvals, D.qr, cr.linalg.cholesky], ids=lambda f: f.__name__)
def test_16_bit_inputs_as_linalg(fn):
    """NumPy's linalg has no float16 kernels: a clear error with the fix; bfloat16 works (as linalg.inv)."""
    a = np.eye(3) * 2 + 0.1
    with pytest.raises(TypeError, match=f"{fn.__name__}.*float16.*astype\\(cr.float32\\)"):
        fn(cr.tensor(a.astype(cr.float16)))
    x = cr.tensor(a.astype(cr.bfloat16), requires_grad=True)
    out = fn(x)
    cr.sum(cr.abs(out[0] if isinstance(out, tuple) else out)).backward()
    assert x.grad.dtype == cr.bfloat16 and np.isfinite(x.grad.data.astype(np.float32)).all()
