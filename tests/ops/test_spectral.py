"""cr.linalg's spectral functions (chainrule.ops.spectral): NumPy's values, dtypes and shapes;
gradients of gauge-invariant losses in both modes against central differences (complex data through
view_as_complex/view_as_real), second order, PyTorch's values and gradients; degenerate spectra and
complex phases (clear errors where the derivative does not exist, working eigenvalue-only and
subspace-invariant losses); full_matrices; composites (pinv, lstsq, cond, matrix_rank, norms)."""
import warnings

import numpy as np
import pytest
from op_specs_spectral import CR

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual

RNG = np.random.default_rng(0)
LA = CR.linalg


def _mh(x):
    return cr.conj(cr.swapaxes(x, -1, -2))


def _sym(a):
    return (a + _mh(a)) * 0.5


def _randn(shape, complex_=False, rng=RNG):
    x = rng.normal(size=shape)
    return x + 1j * rng.normal(size=shape) if complex_ else x


def _as_real_fn(fn, complex_):
    """fn as a map of real arrays (complex data as (..., 2) pairs), for gradcheck."""
    def real_fn(p):
        out = fn(cr.view_as_complex(p) if complex_ else p)
        return cr.view_as_real(out) if out.dtype.kind == "c" else out
    return real_fn


def _param(a):
    a = np.asarray(a)
    return cr.tensor(np.stack([a.real, a.imag], -1) if a.dtype.kind == "c" else a, requires_grad=True)


def _check_all_orders(fn, a):
    complex_ = np.asarray(a).dtype.kind == "c"
    f = _as_real_fn(fn, complex_)
    p = _param(a)
    assert cr.gradcheck(f, (p,), modes=("rev", "fwd"))
    assert cr.gradgradcheck(f, (p,))


# ----- values, dtypes and shapes: NumPy's -----
def _same(got, want):
    got = got.data if isinstance(got, cr.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_numpy_and_reads_one_triangle(complex_, uplo):
    a = _randn((2, 4, 4), complex_)                # not Hermitian: only the UPLO triangle is read
    got = LA.eigh(cr.tensor(a, requires_grad=True), UPLO=uplo)
    want = np.linalg.eigh(a, UPLO=uplo)
    assert type(got).__name__ == "EighResult" and got._fields == ("eigenvalues", "eigenvectors")
    _same(got.eigenvalues, want.eigenvalues)
    _same(got.eigenvectors, want.eigenvectors)
    _same(LA.eigvalsh(cr.tensor(a), UPLO=uplo), np.linalg.eigvalsh(a, UPLO=uplo))
    w, v = LA.eigh(a, UPLO=uplo)                                     # ndarrays in, NumPy's out
    _same(w, want.eigenvalues)


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5), (4, 4)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_matches_numpy(shape, full, complex_):
    a = _randn(shape, complex_)
    got = LA.svd(cr.tensor(a, requires_grad=True), full_matrices=full)
    want = np.linalg.svd(a, full_matrices=full)
    assert got._fields == ("U", "S", "Vh")
    for g, w in zip(got, want):
        _same(g, w)
    _same(LA.svd(cr.tensor(a), compute_uv=False), np.linalg.svd(a, compute_uv=False))
    _same(LA.svdvals(cr.tensor(a)), np.linalg.svdvals(a))


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_hermitian_svd_matches_numpy(complex_):
    a = _randn((2, 4, 4), complex_)
    a = a + np.conj(np.swapaxes(a, -1, -2))
    for g, w in zip(LA.svd(cr.tensor(a), hermitian=True), np.linalg.svd(a, hermitian=True)):
        _same(g, w)
    _same(LA.svd(cr.tensor(a), compute_uv=False, hermitian=True), np.linalg.svd(a, compute_uv=False, hermitian=True))
    _same(LA.pinv(cr.tensor(a), hermitian=True), np.linalg.pinv(a, hermitian=True))
    assert LA.matrix_rank(cr.tensor(a), hermitian=True).tolist() == np.linalg.matrix_rank(a, hermitian=True).tolist()


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_composites_match_numpy(complex_):
    a = _randn((2, 5, 3), complex_)
    low = a[0] @ _randn((3, 4), complex_)[:, :4]        # 5 x 4 of rank 3
    _same(LA.pinv(cr.tensor(a)), np.linalg.pinv(a))
    _same(LA.pinv(cr.tensor(low)), np.linalg.pinv(low))
    _same(LA.pinv(cr.tensor(low), rcond=0.3), np.linalg.pinv(low, rcond=0.3))
    _same(LA.pinv(cr.tensor(low), rtol=None), np.linalg.pinv(low, rtol=None))
    _same(LA.pinv(cr.tensor(np.zeros((0, 3)))), np.linalg.pinv(np.zeros((0, 3))))
    for aa, b in [(a[0], _randn((5,), complex_)), (a[0], _randn((5, 2), complex_)), (low, _randn((5, 2))),
                  (a[0].T, _randn((3,)))]:
        got, want = LA.lstsq(cr.tensor(aa), cr.tensor(b)), np.linalg.lstsq(aa, b)
        _same(got[0], want[0])
        _same(got[1], want[1])
        assert got[2] == want[2] and type(got[2]) is type(want[2])
        _same(got[3], want[3])
    assert LA.matrix_rank(cr.tensor(low)) == np.linalg.matrix_rank(low) == 3
    assert LA.matrix_rank(cr.tensor(low), tol=1e30) == 0
    assert np.array_equal(LA.matrix_rank(cr.tensor(a)), np.linalg.matrix_rank(a))
    sq = _randn((2, 3, 3), complex_)
    for p in [None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"]:
        _same(LA.cond(cr.tensor(sq), p), np.linalg.cond(sq, p))
    _same(LA.cond(cr.tensor(np.ones((3, 3))), 1), np.linalg.cond(np.ones((3, 3)), 1))      # singular: inf
    x = _randn((2, 3, 4), complex_)
    for ord_ in ["fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf]:
        for axis, keep in [((-2, -1), False), ((2, 0), True)]:
            _same(LA.matrix_norm(cr.tensor(x), ord_, axis, keep), np.linalg.norm(x, ord_, axis, keep))
            _same(LA.norm(cr.tensor(x), ord_, axis, keep), np.linalg.norm(x, ord_, axis, keep))
        _same(LA.norm(cr.tensor(x[0]), ord_), np.linalg.norm(x[0], ord_))
    for ord_ in [2, 1, np.inf, -np.inf, 0, 3, -1.5]:
        for axis, keep in [(None, False), (None, True), (1, False), ((0, 2), True), ((2, 0), False)]:
            _same(LA.vector_norm(cr.tensor(x), ord_, axis, keep), np.linalg.vector_norm(x, axis=axis, keepdims=keep,
                                                                                        ord=ord_))


def test_errors_are_clear():
    with pytest.raises(ValueError, match="eigh: expects square"):
        LA.eigh(cr.tensor(np.ones((2, 3))))
    with pytest.raises(ValueError, match="UPLO must be 'L' or 'U'"):
        LA.eigh(cr.tensor(np.eye(2)), UPLO="X")
    with pytest.raises(ValueError, match="svd: expects matrices"):
        LA.svd(cr.tensor(np.ones(3)))
    with pytest.raises(ValueError, match="matrix_norm: invalid norm order 3"):
        LA.matrix_norm(cr.tensor(np.eye(2)), 3)
    with pytest.raises(ValueError, match="lstsq: incompatible"):
        LA.lstsq(cr.tensor(np.eye(3)), cr.tensor(np.ones(2)))
    with pytest.raises(TypeError, match="svdvals.*float16.*float32"):
        LA.svdvals(cr.tensor(np.eye(2, dtype=np.float16)))


# ----- gradients: both modes, second order, complex, PyTorch -----
def _eigh_loss(a):
    w, v = LA.eigh(_sym(a) + np.diag([0.0, 2.0, 4.0, 6.0]))
    return cr.concatenate([(v * w[..., None, :] ** 2) @ _mh(v), v[..., :, :1] @ _mh(v[..., :, :1])], axis=-1)


def _svd_loss(a):
    u, s, vh = LA.svd(a, full_matrices=False)
    return (u * s[..., None, :] ** 3) @ vh + u[..., :, 1:2] @ vh[..., 1:2, :] * s[..., :1, None]


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("name, fn, shape", [
    ("eigh", _eigh_loss, (2, 4, 4)),
    ("eigvalsh", lambda a: LA.eigvalsh(_sym(a)) ** 2, (4, 4)),
    ("svd-tall", _svd_loss, (5, 3)),
    ("svd-wide-batched", _svd_loss, (2, 3, 5)),
    ("svd-square", _svd_loss, (4, 4)),
    ("svdvals", lambda a: LA.svdvals(a) ** 2, (3, 5)),
    ("svd-hermitian", lambda a: (lambda r: r.U @ r.Vh * r.S[..., :1, None])(LA.svd(_sym(a), hermitian=True)), (3, 3)),
    ("pinv", LA.pinv, (5, 3)),
    ("lstsq", lambda a: LA.lstsq(a, cr.tensor(np.arange(5.0)))[0], (5, 3)),
    ("lstsq-residuals-sv", lambda a: cr.concatenate([LA.lstsq(a, cr.tensor(np.arange(10.0).reshape(5, 2)))[1],
                                                     LA.lstsq(a, cr.tensor(np.ones(5)))[3]]), (5, 3)),
    ("cond", lambda a: cr.stack([LA.cond(a, p) for p in [None, -2, "fro", "nuc", 1, -np.inf]]), (3, 3)),
    ("matrix_norm", lambda a: cr.stack([LA.matrix_norm(a, p) for p in ["nuc", 2, -2]]), (3, 4)),
])
def test_gradients_of_gauge_invariant_losses_to_second_order(name, fn, shape, complex_):
    if name.startswith("lstsq") and complex_:
        fn = {"lstsq": lambda a: LA.lstsq(a, cr.tensor(np.arange(5.0) * (1 + 1j)))[0]}.get(name, fn)
    _check_all_orders(fn, _randn(shape, complex_) + (2 * np.eye(*shape[-2:]) if name == "cond" else 0))


def _torch_grad(torch_fn, a, v):
    torch = pytest.importorskip("torch")
    t = torch.tensor(a, requires_grad=True)
    out = torch_fn(torch, t)
    out.backward(torch.tensor(v))
    return out.detach().numpy(), t.grad.numpy()


def _cr_grad(fn, a, v):
    x = cr.tensor(a, requires_grad=True)
    out = fn(x)
    out.backward(cr.tensor(v))
    return out.data, x.grad.data


MAX_ERR = {"value": 0.0, "grad": 0.0}


@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("name, fn, torch_fn, shape", [
    # eigh of a Hermitian input directly (no symmetrisation in the loss): PyTorch's Hermitian gradient
    ("eigh", lambda a: (lambda r: cr.concatenate([r[0][..., None], r[1][..., :, :2] @ _mh(r[1][..., :, :2])], -1))(
        LA.eigh(a)),
     lambda t, a: (lambda r: t.cat([r[0][..., None], r[1][..., :, :2] @ r[1][..., :, :2].mH], -1))(t.linalg.eigh(a)),
     "herm"),
    ("eigh-U", lambda a: (lambda r: r[1][..., :, :1] @ _mh(r[1][..., :, :1]) * r[0][..., -1:, None])(LA.eigh(a, "U")),
     lambda t, a: (lambda r: r[1][..., :, :1] @ r[1][..., :, :1].mH * r[0][..., -1:, None])(t.linalg.eigh(a, "U")),
     (2, 4, 4)),
    ("svd", _svd_loss, lambda t, a: (lambda r: (r.U * r.S[..., None, :] ** 3) @ r.Vh
                                     + r.U[..., :, 1:2] @ r.Vh[..., 1:2, :] * r.S[..., :1, None])(
        t.linalg.svd(a, full_matrices=False)), (2, 5, 3)),
    ("svd-full-used-part", lambda a: (lambda r: r.U[..., :, :3] @ r.Vh[..., :3, :])(LA.svd(a)),
     lambda t, a: (lambda r: r.U[..., :, :3] @ r.Vh[..., :3, :])(t.linalg.svd(a)), (3, 5)),
    ("svdvals", LA.svdvals, lambda t, a: t.linalg.svdvals(a), (2, 3, 4)),
    ("pinv", LA.pinv, lambda t, a: t.linalg.pinv(a), (2, 5, 3)),
    ("cond", lambda a: LA.cond(a), lambda t, a: t.linalg.cond(a), (2, 3, 3)),
    ("cond-nuc", lambda a: LA.cond(a, "nuc"), lambda t, a: t.linalg.cond(a, "nuc"), (2, 3, 3)),
    ("matrix_norm-2", lambda a: LA.matrix_norm(a, 2), lambda t, a: t.linalg.matrix_norm(a, 2), (2, 3, 4)),
    ("matrix_norm--2", lambda a: LA.matrix_norm(a, -2), lambda t, a: t.linalg.matrix_norm(a, -2), (2, 3, 4)),
])
def test_values_and_gradients_match_torch(name, fn, torch_fn, shape, complex_):
    if shape == "herm":
        a = _randn((2, 4, 4), complex_)
        a = a + np.conj(np.swapaxes(a, -1, -2))
    else:
        a = _randn(shape, complex_)
    torch = pytest.importorskip("torch")
    shape_out = torch_fn(torch, torch.tensor(a)).shape
    v = _randn(tuple(shape_out), np.iscomplexobj(a) and name not in ("svdvals", "cond", "cond-nuc")
               and not name.startswith("matrix_norm"))
    want_out, want_grad = _torch_grad(torch_fn, a, v)
    got_out, got_grad = _cr_grad(fn, a, v)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-9, atol=1e-11)
    MAX_ERR["value"] = max(MAX_ERR["value"], float(np.abs(got_out - want_out).max()))
    MAX_ERR["grad"] = max(MAX_ERR["grad"], float(np.abs(got_grad - want_grad).max()))


def test_eigh_gradient_is_the_hermitian_part_of_the_triangle_gradient():
    """NumPy reads only the lower triangle; the gradient is PyTorch's Hermitian one, whose Hermitian
    part equals that of the true (triangle-only) gradient: through a symmetrising map they agree."""
    a = _randn((4, 4))
    x = cr.tensor(a, requires_grad=True)
    LA.eigvalsh(x)[-1].backward()
    g = x.grad.data
    np.testing.assert_allclose(g, g.T, atol=1e-14)
    h = 1e-6
    true = np.zeros((4, 4))
    for i, j in np.ndindex(4, 4):
        e = np.zeros((4, 4))
        e[i, j] = h
        true[i, j] = (np.linalg.eigvalsh(a + e)[-1] - np.linalg.eigvalsh(a - e)[-1]) / (2 * h)
    assert np.allclose(np.triu(true, 1), 0)                       # the unread triangle: no effect
    np.testing.assert_allclose((true + true.T) / 2, g, atol=1e-7)


# ----- degenerate spectra and complex phases -----
def test_eigenvalue_only_losses_work_at_degenerate_eigenvalues():
    d = np.diag([1.0, 1.0, 2.0])
    for f in (lambda x: (LA.eigvalsh(x) ** 2).sum(), lambda x: (LA.eigh(x)[0] ** 2).sum()):
        x = cr.tensor(d, requires_grad=True)
        (g,) = cr.autograd.grad(f(x), x, create_graph=True)
        np.testing.assert_allclose(g.data, 2 * d, atol=1e-14)      # d ||A||_F^2 = 2 A
        # the second derivative needs the eigenvectors' derivative, a 0/0 limit here: a clear error
        with pytest.raises(ValueError, match="eigh: the derivative with respect to the eigenvectors"):
            cr.autograd.grad((g * cr.tensor(np.arange(9.0).reshape(3, 3))).sum(), x)
    x = cr.tensor(np.eye(3), requires_grad=True)
    LA.svdvals(x).sum().backward()
    np.testing.assert_allclose(x.grad.data, np.eye(3), atol=1e-14)
    x = cr.tensor(np.eye(3), requires_grad=True)
    LA.svd(x).S.sum().backward()                                   # svd with a cotangent on S only
    np.testing.assert_allclose(x.grad.data, np.eye(3), atol=1e-14)


def test_pinv_and_lstsq_are_differentiable_at_repeated_singular_values():
    q = np.linalg.qr(_randn((4, 4)))[0]                              # all singular values 1
    for a in (q, 2 * np.eye(3), q[:, :3]):
        x = cr.tensor(a, requires_grad=True)
        assert cr.gradcheck(LA.pinv, (x,), modes=("rev", "fwd"))
        assert cr.gradgradcheck(LA.pinv, (x,))
    b = cr.tensor(np.arange(4.0))
    assert cr.gradcheck(lambda a: LA.lstsq(a, b)[0], (cr.tensor(q[:, :3], requires_grad=True),), modes=("rev", "fwd"))


def test_vector_losses_at_degenerate_spectra_raise():
    x = cr.tensor(np.diag([1.0, 1.0, 2.0]), requires_grad=True)
    v = LA.eigh(x)[1]
    with pytest.raises(ValueError, match=r"eigh: the derivative with respect to the eigenvectors does not exist"
                                         r".*eigenvalues 1 and 1 .*eigvalsh"):
        (v[0, 0] * v[1, 0]).backward()
    x = cr.tensor(np.diag([1.0, 1.0, 2.0]), requires_grad=True)
    v = LA.eigh(x)[1]
    (v[:, 2:] @ v[:, 2:].T).sum().backward()                        # the simple eigenvalue's vector: fine
    assert np.all(np.isfinite(x.grad.data))
    x = cr.tensor(np.eye(3), requires_grad=True)
    u = LA.svd(x)[0]
    with pytest.raises(ValueError, match=r"svd: the derivative with respect to the singular vectors.*svdvals"):
        (u[0, 0] * u[1, 0]).backward()


def test_forward_mode_at_degenerate_eigenvalues_warns_and_keeps_eigenvalues_exact():
    d = np.diag([1.0, 1.0, 2.0])
    t = _randn((3, 3))
    t = t + t.T
    with dual_level():
        with pytest.warns(RuntimeWarning, match="eigh: forward-mode tangent of the eigenvectors"):
            w, v = LA.eigh(make_dual(cr.tensor(d), cr.tensor(t)))
        dw = unpack_dual(w).tangent.data
        dv = unpack_dual(v).tangent.data
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dw2 = unpack_dual(LA.eigvalsh(make_dual(cr.tensor(d), cr.tensor(t)))).tangent.data
    # symmetric functions of the repeated eigenvalues are exact (their sum: the trace of t's block)
    assert dw[0] + dw[1] == pytest.approx(t[0, 0] + t[1, 1]) and dw[2] == pytest.approx(t[2, 2])
    np.testing.assert_allclose(dw, dw2, atol=1e-14)
    assert np.all(np.isfinite(dv))


def test_complex_losses_of_the_phase_raise_like_pytorch():
    a = _randn((3, 3), True)
    x = cr.tensor(a + a.conj().T, requires_grad=True)
    with pytest.raises(ValueError, match="eigh: the loss depends on the phase of eigenvectors"):
        cr.real(LA.eigh(x)[1]).sum().backward()
    x = cr.tensor(_randn((4, 3), True), requires_grad=True)
    with pytest.raises(ValueError, match="svd: the loss depends on the phase of singular vectors"):
        cr.real(LA.svd(x, full_matrices=False).U).sum().backward()
    x = cr.tensor(_randn((4, 3), True), requires_grad=True)
    cr.abs(LA.svd(x, full_matrices=False).U).sum().backward()       # |u|: phase-invariant, fine
    assert np.all(np.isfinite(x.grad.data))


def test_full_matrices_extra_columns_have_no_gradient():
    x = cr.tensor(_randn((5, 3)), requires_grad=True)
    u = LA.svd(x).U
    with pytest.raises(ValueError, match=r"svd: the gradient with respect to the columns of U .* beyond "
                                         r"min\(m, n\) = 3 .*full_matrices=False"):
        u[:, 4].sum().backward()
    # forward mode: the completion's tangent keeps the full U unitary (U^T dU skew)
    a, t = _randn((5, 3)), _randn((5, 3))
    with dual_level():
        u = LA.svd(make_dual(cr.tensor(a), cr.tensor(t))).U
        du = unpack_dual(u).tangent.data
    k = u.data.T @ du
    np.testing.assert_allclose(k, -k.T, atol=1e-12)


def test_zero_singular_values_with_needed_inverse_raise():
    a = np.zeros((4, 3))
    a[0, 0], a[1, 1] = 2.0, 1.0                                       # rank 2, tall: S^-1 (I - U U^T) gU
    x = cr.tensor(a, requires_grad=True)
    u = LA.svd(x, full_matrices=False).U
    with pytest.raises(ValueError, match="zero singular values"):
        (u[:, 2] * cr.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    x = cr.tensor(a, requires_grad=True)
    LA.pinv(x).sum().backward()                                       # pinv drops them: fine
    assert np.all(np.isfinite(x.grad.data))


def test_flops_are_counted():
    assert cr.PRIMITIVES["svd"].flops(None, np.zeros((4, 3))) == 4 * 4 * 3 * 3 + 8 * 27
    assert cr.PRIMITIVES["eigh"].flops(None, np.zeros((2, 3, 3))) == 9 * 18 * 3
