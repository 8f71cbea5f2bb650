"""cr.linalg's spectral functions (chainrule.numpy.spectral): NumPy's values, dtypes and shapes;
gradients of gauge-invariant losses in both modes against central differences (complex data through
view_as_complex/view_as_real), second order, PyTorch's values and gradients; degenerate spectra and
complex phases (clear errors where the derivative does not exist, working eigenvalue-only and
subspace-invariant losses); full_matrices; composites (pinv, lstsq, cond, matrix_rank, norms)."""
import warnings

import numpy as np
import pytest

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual
from tests.op_specs.spectral import CR

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
            _same(LA.matrix_norm(cr.tensor(x), ord=ord_, axis=axis, keepdims=keep), np.linalg.norm(x, ord_, axis, keep))
            _same(LA.norm(cr.tensor(x), ord_, axis, keep), np.linalg.norm(x, ord_, axis, keep))
        _same(LA.norm(cr.tensor(x[0]), ord_), np.linalg.norm(x[0], ord_))
    for ord_ in [2, 1, np.inf, -np.inf, 0, 3, -1.5]:
        for axis, keep in [(None, False), (None, True), (1, False), ((0, 2), True), ((2, 0), False)]:
            _same(LA.vector_norm(cr.tensor(x), ord=ord_, axis=axis, keepdims=keep),
                  np.linalg.vector_norm(x, axis=axis, keepdims=keep, ord=ord_))


def test_errors_are_clear():
    with pytest.raises(ValueError, match="eigh: expects square"):
        LA.eigh(cr.tensor(np.ones((2, 3))))
    with pytest.raises(ValueError, match="UPLO must be 'L' or 'U'"):
        LA.eigh(cr.tensor(np.eye(2)), UPLO="X")
    with pytest.raises(ValueError, match="svd: expects matrices"):
        LA.svd(cr.tensor(np.ones(3)))
    with pytest.raises(ValueError, match="matrix_norm: invalid norm order 3"):
        LA.matrix_norm(cr.tensor(np.eye(2)), ord=3)
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
    ("matrix_norm", lambda a: cr.stack([LA.matrix_norm(a, ord=p) for p in ["nuc", 2, -2]]), (3, 4)),
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
    ("matrix_norm-2", lambda a: LA.matrix_norm(a, ord=2), lambda t, a: t.linalg.matrix_norm(a, 2), (2, 3, 4)),
    ("matrix_norm--2", lambda a: LA.matrix_norm(a, ord=-2), lambda t, a: t.linalg.matrix_norm(a, -2), (2, 3, 4)),
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
def _rotated(values, complex_=False, seed=1):
    """Q diag(values) Q^H for a random unitary Q: repeated eigenvalues in a basis NumPy does not pick."""
    q = np.linalg.qr(_randn((len(values), len(values)), complex_, np.random.default_rng(seed)))[0]
    return (q * np.asarray(values, float)) @ q.conj().T


def _fd_hvp(f, a, d, h=1e-5):
    """Central differences of the (analytic, first-order) gradient of f along d."""
    g = cr.grad(f)
    return (g(cr.tensor(a + h * d)).data - g(cr.tensor(a - h * d)).data) / (2 * h)


def _fd_grad(f, a, sym, h=1e-6):
    """Central differences of the loss along each entry's unit perturbation (symmetrised with ``sym``)."""
    out = np.zeros_like(a)
    for i, j in np.ndindex(*a.shape):
        e = np.zeros_like(a)
        e[i, j] = 1.0
        e = (e + e.T) / 2 if sym else e
        out[i, j] = (float(f(cr.tensor(a + h * e)).data) - float(f(cr.tensor(a - h * e)).data)) / (2 * h)
    return out


_W = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0], [-0.75, 2.0, 1.5]])      # a generic weight


def test_eigenvalue_only_losses_work_at_degenerate_eigenvalues():
    d = np.diag([1.0, 1.0, 2.0])
    c = cr.tensor(np.arange(9.0).reshape(3, 3))
    for f in (lambda x: (LA.eigvalsh(x) ** 2).sum(), lambda x: (LA.eigh(x)[0] ** 2).sum()):
        x = cr.tensor(d, requires_grad=True)
        (g,) = cr.autograd.grad(f(x), x, create_graph=True)
        np.testing.assert_allclose(g.data, 2 * d, atol=1e-14)      # d ||A||_F^2 = 2 A
    x = cr.tensor(np.eye(3), requires_grad=True)
    LA.svdvals(x).sum().backward()
    np.testing.assert_allclose(x.grad.data, np.eye(3), atol=1e-14)
    x = cr.tensor(np.eye(3), requires_grad=True)
    LA.svd(x).S.sum().backward()                                   # svd with a cotangent on S only
    np.testing.assert_allclose(x.grad.data, np.eye(3), atol=1e-14)
    # reverse-over-reverse through eigh: its gradient V diag(2w) V^T uses the eigenvectors inside the
    # repeated block, where the cotangent does not determine the derivative: it refuses, naming eigvalsh
    x = cr.tensor(d, requires_grad=True)
    (g,) = cr.autograd.grad((LA.eigh(x)[0] ** 2).sum(), x, create_graph=True)
    with pytest.raises(ValueError, match=r"eigh: no derivative with respect to the eigenvectors here: eigenvalues "
                                         r"1 and 1 .*cr\.linalg\.eigvalsh for functions of the eigenvalues \(exact; "
                                         r"second order with cr\.hvp\)"):
        cr.autograd.grad((g * c).sum(), x)
    np.testing.assert_allclose(cr.hvp(lambda a: (LA.eigvalsh(a) ** 2).sum(), (d,), (c.data + c.data.T,))[0],
                               2 * (c.data + c.data.T), atol=1e-12)         # the advice: exact
    # forward-over-reverse through eigh warns that its eigenvectors' tangent is not exact for that
    with pytest.warns(RuntimeWarning, match=r"wrong for .*second derivatives \(cr.hvp\) of eigh's eigenvalues"):
        cr.hvp(lambda a: (LA.eigh(a)[0] ** 2).sum(), (d,), (c.data + c.data.T,))


# issue 26, items 5 and 11: second derivatives of smooth functions of a spectrum at repeated values
_SPECTRAL_FUNCTIONS = {
    "sum_w2": (lambda a: (LA.eigvalsh(a) ** 2).sum(), "h"),          # ||A||_F^2: Hessian 2 I
    "sum_w3": (lambda a: (LA.eigvalsh(a) ** 3).sum(), "h"),          # tr A^3
    "logsumexp_w": (lambda a: cr.log(cr.exp(LA.eigvalsh(a)).sum()), "h"),     # log tr e^A
    "sum_s2": (lambda a: (LA.svdvals(a) ** 2).sum(), "g"),
    "sum_s3": (lambda a: (LA.svdvals(a) ** 3).sum(), "g"),
    "nuclear": (lambda a: LA.svdvals(a).sum(), "g"),
}
_DEGENERATE = {
    "I2": np.eye(2), "2I3": 2 * np.eye(3), "diag113": np.diag([1.0, 1.0, 3.0]), "rotated113": _rotated([1, 1, 3]),
    "two_pairs": _rotated([1, 1, 2, 2], seed=2), "split_1e-8": _rotated([1, 1 + 1e-8, 3]),
}


@pytest.mark.parametrize("mat", sorted(_DEGENERATE))
@pytest.mark.parametrize("name", sorted(_SPECTRAL_FUNCTIONS))
def test_hvp_of_spectral_functions_at_repeated_values_matches_central_differences(name, mat):
    f, kind = _SPECTRAL_FUNCTIONS[name]
    a = _DEGENERATE[mat]
    d = _randn(a.shape, rng=np.random.default_rng(3))
    d = d + d.T if kind == "h" else d
    with warnings.catch_warnings():
        warnings.simplefilter("error")                            # and no warning: the result is exact
        got = cr.hvp(f, (a,), (d,))[0]
    np.testing.assert_allclose(got, _fd_hvp(f, a, d), atol=2e-6 * (1 + np.abs(got).max()))


@pytest.mark.parametrize("shape", [(4, 3), (3, 4)])
@pytest.mark.parametrize("name", ["sum_s2", "sum_s3", "nuclear"])
def test_hvp_of_singular_value_functions_at_repeated_values_rectangular(name, shape):
    f = _SPECTRAL_FUNCTIONS[name][0]
    a = np.eye(*shape) * 2.0                                        # singular values (2, 2, 2)
    d = _randn(shape, rng=np.random.default_rng(8))
    got = cr.hvp(f, (a,), (d,))[0]
    np.testing.assert_allclose(got, _fd_hvp(f, a, d), atol=2e-6 * (1 + np.abs(got).max()))


@pytest.mark.parametrize("name", ["sum_w3", "logsumexp_w", "sum_s3"])
def test_hvp_at_repeated_values_complex(name):
    f, kind = _SPECTRAL_FUNCTIONS[name]
    a = _rotated([1, 1, 3], complex_=True)
    d = _randn((3, 3), True, np.random.default_rng(5))
    d = d + d.conj().T if kind == "h" else d
    got = cr.hvp(f, (a,), (d,))[0]
    np.testing.assert_allclose(got, _fd_hvp(f, a, d), atol=2e-6 * (1 + np.abs(got).max()))


def test_hvp_reproducers_of_issue_26():
    e01 = np.array([[0.0, 1.0], [1.0, 0.0]])
    got = cr.hvp(lambda a: (LA.eigvalsh(a) ** 2).sum(), (np.eye(2),), (e01,))[0]
    np.testing.assert_allclose(got, 2 * e01, atol=1e-14)                 # was 0
    e = np.array([[0.0, 1.0], [0.0, 0.0]])
    got = cr.hvp(lambda a: (LA.svdvals(a) ** 2).sum(), (np.eye(2),), (e,))[0]
    np.testing.assert_allclose(got, 2 * e, atol=1e-14)                   # was antisymmetric
    # the Hessian by jacfwd(grad) (a batch of tangents), and jvp of jvp along two directions
    h = cr.hessian(lambda a: (LA.eigvalsh(a) ** 2).sum())(cr.tensor(np.eye(2))).data
    np.testing.assert_allclose(np.einsum("ijkl,kl->ij", h, e01), 2 * e01, atol=1e-14)
    d1, d2 = _randn((3, 3)), _randn((3, 3))
    d1, d2 = d1 + d1.T, d2 + d2.T
    f = _SPECTRAL_FUNCTIONS["sum_w3"][0]
    a = _DEGENERATE["rotated113"]
    mixed = cr.jvp(lambda x: cr.jvp(f, (x,), (cr.tensor(d1),))[1], (cr.tensor(a),), (cr.tensor(d2),))[1]
    assert float(mixed.data) == pytest.approx(float((cr.hvp(f, (a,), (d1,))[0] * d2).sum()), rel=1e-12)


@pytest.mark.parametrize("split", [1e-3, 1e-6])
def test_hvp_near_repeated_values_matches_torch_func(split):
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("torch.func")
    a = _rotated([1, 1 + split, 3])
    d = _randn((3, 3), rng=np.random.default_rng(6))
    for f, tfn, dd in ((lambda x: (LA.eigvalsh(x) ** 3).sum(), lambda x: (torch.linalg.eigvalsh(x) ** 3).sum(),
                        d + d.T),
                       (lambda x: (LA.svdvals(x) ** 3).sum(), lambda x: (torch.linalg.svdvals(x) ** 3).sum(), d)):
        want = tf.jvp(tf.grad(tfn), (torch.tensor(a),), (torch.tensor(dd),))[1].numpy()
        np.testing.assert_allclose(cr.hvp(f, (a,), (dd,))[0], want, atol=1e-9 / split ** 0.5)


def test_first_order_jvp_at_repeated_eigenvalues_is_the_one_sided_derivative():
    a, t = np.eye(2), np.array([[0.0, 1.0], [1.0, 0.0]])
    _, dw = cr.jvp(LA.eigvalsh, (a,), (t,))
    np.testing.assert_allclose(dw, [-1.0, 1.0], atol=1e-14)             # eigvalsh(I + h t) = 1 -+ h
    _, ds = cr.jvp(LA.svdvals, (a,), (np.array([[0.0, 2.0], [0.0, 0.0]]),))
    np.testing.assert_allclose(ds, [1.0, -1.0], atol=1e-14)             # svdvals(I + h t) = 1 +- h


@pytest.mark.parametrize("name", ["sum_w3", "logsumexp_w", "sum_s3"])
def test_third_order_at_repeated_values(name):
    f, kind = _SPECTRAL_FUNCTIONS[name]
    a = _DEGENERATE["rotated113"]
    rng = np.random.default_rng(4)
    d, d2 = _randn((3, 3), rng=rng), _randn((3, 3), rng=rng)
    if kind == "h":
        d, d2 = d + d.T, d2 + d2.T
    # along one direction: d/dt of the hvp, against central differences of the hvp (itself checked above)
    got = cr.jvp(lambda x: cr.hvp(f, (x,), (d,))[0], (cr.tensor(a),), (cr.tensor(d),))[1].data
    h = 1e-4
    want = (cr.hvp(f, (a + h * d,), (d,))[0] - cr.hvp(f, (a - h * d,), (d,))[0]) / (2 * h)
    np.testing.assert_allclose(got, want, atol=1e-6 * (1 + np.abs(want).max()))
    # along different directions it needs the divided differences' derivative: a clear refusal
    with pytest.raises(ValueError, match=r"third \(and higher\) derivatives .* different directions .*cr.hvp"):
        cr.jvp(lambda x: cr.hvp(f, (x,), (d,))[0], (cr.tensor(a),), (cr.tensor(d2),))
    # so do jvp of jvp of jvp (the eigenvalues' third derivative) and cr.grad of a cr.jvp there
    with pytest.raises(ValueError, match=r"derivatives of order 3 and higher at repeated .*cr\.hvp"):
        cr.jvp(lambda x: cr.jvp(lambda y: cr.jvp(f, (y,), (cr.tensor(d),))[1], (x,), (cr.tensor(d),))[1],
               (cr.tensor(a),), (cr.tensor(d),))
    with pytest.raises(ValueError, match=r"a reverse-mode derivative of its derivative .*cr\.hvp"):
        cr.grad(lambda x: cr.jvp(f, (x,), (cr.tensor(d),))[1])(cr.tensor(a))
    # away from repeated values all of these are exact
    b = np.diag([1.0, 2.0, 3.5])
    got = cr.grad(lambda x: cr.jvp(f, (x,), (cr.tensor(d),))[1])(cr.tensor(b)).data
    np.testing.assert_allclose(got if kind == "g" else (got + got.T) / 2, cr.hvp(f, (b,), (d,))[0], atol=1e-10)


def test_reverse_over_reverse_at_repeated_values_raises_with_advice_that_works():
    d = np.array([[0.0, 1.0], [1.0, 0.0]])
    f = lambda t: (LA.eigvalsh(np.eye(2) + t * d) ** 2).sum()            # noqa: E731
    with pytest.raises(ValueError, match=r"eigvalsh: reverse-over-reverse .*repeated eigenvalues.*cr\.hvp"):
        cr.grad(cr.grad(f))(cr.tensor(0.0))
    np.testing.assert_allclose(cr.hvp(f, (np.array(0.0),), (np.array(1.0),))[0], 4.0)     # 2 ||d||_F^2
    np.testing.assert_allclose(cr.jacfwd(cr.grad(f))(np.array(0.0)), 4.0)
    g = lambda t: (LA.svdvals(np.eye(2) + t * d) ** 2).sum()             # noqa: E731
    with pytest.raises(ValueError, match=r"svdvals: reverse-over-reverse .*repeated singular values.*cr\.hvp"):
        cr.grad(cr.grad(g))(cr.tensor(0.0))
    np.testing.assert_allclose(cr.hvp(g, (np.array(0.0),), (np.array(1.0),))[0], 4.0)
    # away from the repeated values reverse-over-reverse is exact, and agrees with the advice
    a = cr.tensor(np.diag([1.0, 2.0, 4.0]), requires_grad=True)
    (gr,) = cr.autograd.grad((LA.eigvalsh(a) ** 3).sum(), a, create_graph=True)
    (h,) = cr.autograd.grad((gr * cr.tensor(_W)).sum(), a)
    np.testing.assert_allclose(h.data, cr.hvp(lambda x: (LA.eigvalsh(x) ** 3).sum(), (a.data,),
                                              ((_W + _W.T) / 2,))[0], atol=1e-10)


def test_second_derivatives_at_zero_singular_values_raise_clearly():
    a = np.diag([2.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"svdvals: the second derivative .* zero singular values"):
        cr.hvp(lambda x: (LA.svdvals(x) ** 2).sum(), (a,), (_W,))


def test_pinv_and_lstsq_are_differentiable_at_repeated_singular_values():
    q = np.linalg.qr(_randn((4, 4)))[0]                              # all singular values 1
    for a in (q, 2 * np.eye(3), q[:, :3]):
        x = cr.tensor(a, requires_grad=True)
        assert cr.gradcheck(LA.pinv, (x,), modes=("rev", "fwd"))
        assert cr.gradgradcheck(LA.pinv, (x,))
    b = cr.tensor(np.arange(4.0))
    assert cr.gradcheck(lambda a: LA.lstsq(a, b)[0], (cr.tensor(q[:, :3], requires_grad=True),), modes=("rev", "fwd"))


# issue 26, items 10 and 11: vector losses at exactly repeated values. Between equal values the cotangent
# X = V^H dL/dV does not determine the 0/0 entries of the inner matrix (for any c, some loss invariant
# under rotations inside the block has this cotangent and the entries c X_ij), so eigh/svd compute only
# where X is ~0 there (the loss does not use those vectors) and raise otherwise, with advice tested below.
_MSG = r"no derivative with respect to the (eigen|singular )vectors here: .* are \(nearly\) equal and the loss uses"


def _rotated_svd(values, seed=1):
    """U diag(values) V^T for random orthogonal U, V: repeated singular values in a basis NumPy does not pick."""
    rng = np.random.default_rng(seed)
    q1, q2 = (np.linalg.qr(rng.normal(size=(len(values), len(values))))[0] for _ in range(2))
    return (q1 * np.asarray(values, float)) @ q2.T


def _proj(x):
    v = LA.eigh(x)[1]
    return ((v[:, :2] @ v[:, :2].T) * _W).sum()                      # onto the whole eigenspace of (1, 1)


def _recon(x):
    w, v = LA.eigh(x)
    return (((v * w) @ v.T) * _W).sum()                              # V diag(w) V^T = A


def _sqrtm(x):
    w, v = LA.eigh(x)
    return (((v * cr.sqrt(w)) @ v.T) * _W).sum()


def _svd_recon(x):
    u, s, vh = LA.svd(x)
    return (((u * s) @ vh) * _W).sum()


def _svd_polar(x):
    u, s, vh = LA.svd(x)
    return (((u * cr.sqrt(s)) @ vh) * _W).sum()


def _svd_left_proj(x):
    u = LA.svd(x)[0]
    return ((u[:, :2] @ u[:, :2].T) * _W).sum()


_G1, _G2 = np.array([[1.0, 0.3], [0.3, 2.0]]), np.array([[1.0, -0.7], [-0.7, 2.0]])


def _mixture(x):        # sum(G1 o A) + sum(G2 o A^2) through eigh: its gradient at 2I is G1 + 4 G2
    w, v = LA.eigh(x)
    return (_G1 * ((v * w) @ v.T)).sum() + (_G2 * ((v * w ** 2) @ v.T)).sum()


def _svd_mixture(x):    # sum(G1 o A) + sum(G2 o A A^T A) through svd: at 2I, G1 + 12 G2
    u, s, vh = LA.svd(x)
    return (_G1 * ((u * s) @ vh)).sum() + (_G2 * ((u * s ** 3) @ vh)).sum()


def _simple_proj(x):    # the simple eigenvalue's vector and a function of all eigenvalues
    w, v = LA.eigh(x)
    return ((v[:, 2:] @ v[:, 2:].T) * _W).sum() + (w ** 3).sum()


def _simple_recon(x):   # at (1, 1, 3, 5): the vectors of 3 and 5 only
    w, v = LA.eigh(x)
    return (((v[:, 2:] * w[2:]) @ v[:, 2:].T) * np.outer([1.0, -2.0, 0.5, 3.0], [2.0, 1.0, -1.0, 0.25])).sum()


def _diag_recon(x):     # at 2I: V^T dL/dV is diagonal (V = I), so nothing reaches the 0/0 entries
    w, v = LA.eigh(x)
    return (cr.diagonal((v * w) @ v.T) * np.array([1.0, 2.0, 3.0])).sum()


def _svd_simple(x):     # the simple singular value's pair u3 v3^T
    u, s, vh = LA.svd(x)
    return ((u[:, 2:] @ vh[2:]) * _W).sum() + (s ** 2).sum()


_REFUSED = {
    "proj": (_proj, np.diag([1.0, 1.0, 3.0])), "proj-rotated": (_proj, _rotated([1, 1, 3])),
    "recon-2I": (_recon, 2 * np.eye(3)), "recon-rotated": (_recon, _rotated([1, 1, 3])),
    "recon-pair-split": (_recon, _rotated([2, 2, 2 + 1e-8])),
    "sqrtm": (_sqrtm, np.diag([1.0, 1.0, 3.0])), "sqrtm-rotated": (_sqrtm, _rotated([1, 1, 3])),
    "mixture-2I": (_mixture, 2 * np.eye(2)), "svd-recon-2I": (_svd_recon, 2 * np.eye(3)),
    "svd-polar": (_svd_polar, np.diag([3.0, 1.0, 1.0])), "svd-left-proj": (_svd_left_proj, np.diag([2.0, 2.0, 1.0])),
    "svd-mixture-2I": (_svd_mixture, 2 * np.eye(2)), "svd-rotated": (_svd_recon, _rotated_svd([2, 2, 1])),
}
_COMPUTED = {
    "proj-split": (_proj, _rotated([1, 1 + 1e-8, 3])), "recon-split": (_recon, _rotated([2, 2 + 1e-8, 2 + 2e-8])),
    "simple-proj": (_simple_proj, np.diag([1.0, 1.0, 3.0])), "simple-proj-rotated": (_simple_proj, _rotated([1, 1, 3])),
    "simple-recon": (_simple_recon, _rotated([1, 1, 3, 5], seed=3)), "diag-recon-2I": (_diag_recon, 2 * np.eye(3)),
    "svd-simple": (_svd_simple, np.diag([2.0, 2.0, 1.0])), "svd-simple-rotated": (_svd_simple, _rotated_svd([2, 2, 1])),
}
_SVD_FNS = (_svd_recon, _svd_polar, _svd_left_proj, _svd_mixture, _svd_simple)


@pytest.mark.parametrize("name", sorted(_REFUSED))
def test_vector_losses_that_reach_the_repeated_block_raise(name):
    fn, a = _REFUSED[name]
    with pytest.raises(ValueError, match=_MSG):
        cr.grad(fn)(cr.tensor(a))


@pytest.mark.parametrize("name", sorted(_COMPUTED))
def test_vector_losses_that_do_not_reach_the_repeated_block_are_computed(name):
    fn, a = _COMPUTED[name]
    got = cr.grad(fn)(cr.tensor(a)).data
    sym = fn not in _SVD_FNS                                        # eigh's gradient is the Hermitian one
    want = _fd_grad(fn, a, sym)
    np.testing.assert_allclose((got + got.T) / 2 if sym else got, want, atol=2e-7 * (1 + np.abs(want).max()))
    if fn is _diag_recon:
        np.testing.assert_allclose(got, np.diag([1.0, 2.0, 3.0]), atol=1e-12)


def test_mixture_of_matrix_functions_at_2I_raises_instead_of_a_wrong_gradient():
    # regression: the cotangent was read as one matrix function, and the off-diagonal came out -1.8333
    with pytest.raises(ValueError, match=_MSG):
        cr.grad(_mixture)(cr.tensor(2 * np.eye(2)))
    want = _G1 + 4 * _G2                                            # [[5, -2.5], [-2.5, 10]]
    near = cr.grad(_mixture)(cr.tensor(2 * np.eye(2) + np.diag([0.0, 1e-7]))).data
    np.testing.assert_allclose(near, want, atol=1e-6)               # the tie broken: O(eps)
    got = cr.grad(lambda a: (_G1 * a).sum() + (_G2 * (a @ a)).sum())(cr.tensor(2 * np.eye(2))).data
    np.testing.assert_allclose(got, want, atol=1e-14)               # the advice: matrix ops
    with pytest.raises(ValueError, match=_MSG):
        cr.grad(_svd_mixture)(cr.tensor(2 * np.eye(2)))
    got = cr.grad(lambda a: (_G1 * a).sum() + (_G2 * (a @ a.T @ a)).sum())(cr.tensor(2 * np.eye(2))).data
    np.testing.assert_allclose(got, _fd_grad(_svd_mixture, 2 * np.eye(2), False), atol=1e-6)


def test_the_refusals_example_two_losses_with_one_cotangent_and_two_gradients():
    """The message's claim: at 2I, sum(V diag(w) V^T) and sum(w) + 2 sum(V V^T) (sum(U diag(S) Vh) and
    sum(S) + 2 sum(U Vh)) get the same cotangent, and their gradients (from the tie broken) differ."""
    a = 2 * np.eye(3)
    split = a + np.diag([0.0, 1e-6, 2e-6])
    pairs = (
        (LA.eigh, lambda w, v: ((v * w) @ v.T).sum(), lambda w, v: w.sum() + 2 * (v @ v.T).sum(), np.eye(3)),
        (LA.svd, lambda u, s, vh: ((u * s) @ vh).sum(), lambda u, s, vh: s.sum() + 2 * (u @ vh).sum(), np.eye(3)),
    )
    for dec, l1, l2, g2 in pairs:
        x = cr.tensor(a, requires_grad=True)
        outs = list(dec(x))
        c1 = cr.autograd.grad(l1(*outs), outs, retain_graph=True)
        c2 = cr.autograd.grad(l2(*outs), outs, retain_graph=True)
        for u, v in zip(c1, c2):
            np.testing.assert_allclose(u.data, v.data, atol=1e-12)
        np.testing.assert_allclose(cr.grad(lambda y: l1(*dec(y)))(cr.tensor(split)).data, np.ones((3, 3)), atol=1e-5)
        np.testing.assert_allclose(cr.grad(lambda y: l2(*dec(y)))(cr.tensor(split)).data, g2, atol=1e-5)
        for f in (l1, l2):
            with pytest.raises(ValueError, match=_MSG):
                cr.grad(lambda y: f(*dec(y)))(cr.tensor(a))


def test_the_advice_of_the_refusal_works():
    # (a) functions of the values: eigvalsh / svdvals, second order exact with cr.hvp (at 2I)
    d = _randn((3, 3), rng=np.random.default_rng(9))
    got = cr.hvp(lambda a: (LA.eigvalsh(a) ** 3).sum(), (2 * np.eye(3),), (d + d.T,))[0]
    np.testing.assert_allclose(got, 12 * (d + d.T), atol=1e-12)      # d(3 A^2) = 3 (A E + E A)
    got = cr.hvp(lambda a: (LA.svdvals(a) ** 2).sum(), (2 * np.eye(3),), (d,))[0]
    np.testing.assert_allclose(got, 2 * d, atol=1e-12)
    # (b) V f(w) V^T with matrix ops: A @ A, matrix_power, matrix_exp, exact at 2I (against the eigh loss' differences)
    a = 2 * np.eye(3)
    for mat, fn in ((lambda x: x @ x, lambda w: w ** 2), (lambda x: cr.linalg.matrix_power(x, 3), lambda w: w ** 3),
                    (cr.linalg.matrix_exp, cr.exp)):
        def via_eigh(x, fn=fn):
            w, v = LA.eigh(x)
            return (((v * fn(w)) @ v.T) * _W).sum()
        got = cr.grad(lambda x, mat=mat: (mat(x) * _W).sum())(cr.tensor(a)).data
        np.testing.assert_allclose((got + got.T) / 2, _fd_grad(via_eigh, a, True), atol=1e-6 * np.abs(got).max())
    # (c) a projector onto a whole eigenspace, at the eigenvalues (1, 1, 3) in a rotated basis
    a = _rotated([1, 1, 3])
    want = _fd_grad(_proj, a, True)
    eye = np.eye(3)

    def poly(x):                      # p(A) with p = 1, p' = 0 at 1 and p = 0, p' = 0 at 3: I - 3T^2 + 2T^3
        t = (x - eye) / 2
        return ((eye - 3 * (t @ t) + 2 * (t @ t @ t)) * _W).sum()

    def complement(x):                # I minus the simple eigenvalue's projector
        v = LA.eigh(x)[1]
        return ((eye - v[:, 2:] @ v[:, 2:].T) * _W).sum()
    assert float(poly(cr.tensor(a)).data) == pytest.approx(float(_proj(cr.tensor(a)).data), abs=1e-12)
    for f in (poly, complement):
        got = cr.grad(f)(cr.tensor(a)).data
        np.testing.assert_allclose((got + got.T) / 2, want, atol=1e-7)
    b = _randn((3, 3), rng=np.random.default_rng(10))
    errs = [np.abs(_sym(cr.grad(_proj)(cr.tensor(a + eps * (b + b.T)))).data - want).max()
            for eps in (1e-3, 1e-4)]                                  # the tie broken: an O(eps) error
    assert errs[1] < 2e-3 and errs[1] < errs[0] / 5
    # svd: a right singular projector at singular values (2, 2, 1) as 3T^2 - 2T^3, T = (A^T A - I) / 3
    a = _rotated_svd([2, 2, 1])

    def right_proj(x):
        v = LA.svd(x)[2][:2].T
        return ((v @ v.T) * _W).sum()

    def right_poly(x):
        t = (x.T @ x - eye) / 3
        return ((3 * (t @ t) - 2 * (t @ t @ t)) * _W).sum()
    with pytest.raises(ValueError, match=_MSG):
        cr.grad(right_proj)(cr.tensor(a))
    np.testing.assert_allclose(cr.grad(right_poly)(cr.tensor(a)).data, _fd_grad(right_proj, a, False), atol=1e-7)


def test_vector_losses_at_degenerate_spectra_complex_hermitian():
    a = _rotated([1, 1, 3], complex_=True)
    w = _W + 1j * _W.T

    def proj(x):                      # onto the repeated eigenspace: refused
        v = LA.eigh(x)[1]
        return cr.real(((v[:, :2] @ _mh(v[:, :2])) * w).sum())

    def simple(x):                    # the simple eigenvalue's projector: computed
        v = LA.eigh(x)[1]
        return cr.real(((v[:, 2:] @ _mh(v[:, 2:])) * w).sum())
    with pytest.raises(ValueError, match=_MSG):
        proj(cr.tensor(a, requires_grad=True)).backward()
    x = cr.tensor(a, requires_grad=True)
    simple(x).backward()
    h = 1e-6
    for i, j, z in ((0, 1, 1), (0, 2, 1j), (0, 0, 1)):
        e = np.zeros((3, 3), complex)
        e[i, j] = z
        e = e + e.conj().T                                          # Hermitian directions
        fd = (float(simple(cr.tensor(a + h * e)).data) - float(simple(cr.tensor(a - h * e)).data)) / (2 * h)
        assert float(np.real(np.vdot(x.grad.data, e))) == pytest.approx(fd, abs=1e-7)
    # svd of a complex matrix with singular values (2, 2, 1): a pair's projector u3 u3^H is computed, U diag(S) Vh not
    rng = np.random.default_rng(11)
    q1, q2 = (np.linalg.qr(_randn((3, 3), True, rng))[0] for _ in range(2))
    c = (q1 * [2.0, 2.0, 1.0]) @ q2.conj().T
    x = cr.tensor(c, requires_grad=True)
    u = LA.svd(x)[0]
    cr.real(((u[:, 2:] @ _mh(u[:, 2:])) * w).sum()).backward()
    assert np.all(np.isfinite(x.grad.data))
    u, s, vh = LA.svd(x := cr.tensor(c, requires_grad=True))
    with pytest.raises(ValueError, match=_MSG):
        cr.real((((u * s) @ vh) * w).sum()).backward()


def test_vector_losses_at_degenerate_spectra_raise():
    x = cr.tensor(np.diag([1.0, 1.0, 2.0]), requires_grad=True)
    v = LA.eigh(x)[1]
    with pytest.raises(ValueError, match=r"eigh: no derivative with respect to the eigenvectors here: eigenvalues 1 "
                                         r"and 1 .*depends on which basis.*eigvalsh"):
        (v[0, 0] * v[1, 0]).backward()
    x = cr.tensor(np.diag([1.0, 1.0, 2.0]), requires_grad=True)
    v = LA.eigh(x)[1]
    (v[:, 2:] @ v[:, 2:].T).sum().backward()                        # the simple eigenvalue's vector: fine
    assert np.all(np.isfinite(x.grad.data))
    x = cr.tensor(np.eye(3), requires_grad=True)
    u = LA.svd(x)[0]
    with pytest.raises(ValueError, match=r"svd: no derivative with respect to the singular vectors here.*depends on "
                                         r"which basis.*svdvals"):
        (u[0, 0] * u[1, 0]).backward()


def test_vector_losses_at_degenerate_spectra_under_vmap():
    q = np.linalg.qr(_randn((3, 3), rng=np.random.default_rng(7)))[0]
    batch = np.stack([np.diag([1.0, 1.0, 3.0]), q @ np.diag([2.0, 2.0, 5.0]) @ q.T])
    got = cr.vmap(cr.grad(_simple_proj))(batch)
    got = got.data if isinstance(got, cr.Tensor) else got
    for g, a in zip(got, batch):
        np.testing.assert_allclose((g + g.T) / 2, _fd_grad(_simple_proj, a, True), atol=1e-6)
    for fn in (_proj, _recon):
        with pytest.raises(ValueError, match=_MSG):
            cr.vmap(cr.grad(fn))(batch)
    # one degenerate example in a batch of simple ones still refuses
    with pytest.raises(ValueError, match=_MSG):
        cr.vmap(cr.grad(_proj))(np.stack([np.diag([1.0, 2.0, 3.0]), np.diag([1.0, 1.0, 3.0])]))
    svd_batch = np.stack([np.diag([2.0, 2.0, 1.0]), _rotated_svd([2, 2, 1])])
    got = cr.vmap(cr.grad(_svd_simple))(svd_batch)
    got = got.data if isinstance(got, cr.Tensor) else got
    for g, a in zip(got, svd_batch):
        np.testing.assert_allclose(g, _fd_grad(_svd_simple, a, False), atol=1e-6)
    with pytest.raises(ValueError, match=_MSG):
        cr.vmap(cr.grad(_svd_recon))(svd_batch)


def test_forward_mode_at_degenerate_eigenvalues_warns_and_keeps_eigenvalues_exact():
    d = np.diag([1.0, 1.0, 2.0])
    t = _randn((3, 3))
    t = t + t.T
    with dual_level():
        with pytest.warns(RuntimeWarning, match="eigh: at .*equal eigenvalues the eigenvectors have no forward-mode "
                                                "tangent.*wrong for reconstructions"):
            w, v = LA.eigh(make_dual(cr.tensor(d), cr.tensor(t)))
        dw = unpack_dual(w).tangent.data
        dv = unpack_dual(v).tangent.data
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dw2 = unpack_dual(LA.eigvalsh(make_dual(cr.tensor(d), cr.tensor(t)))).tangent.data
    # the one-sided directional derivatives: the repeated pair moves by the eigenvalues of t's block
    np.testing.assert_allclose(dw[:2], np.linalg.eigvalsh(t[:2, :2]), atol=1e-14)
    assert dw[2] == pytest.approx(t[2, 2])
    h = 1e-7
    np.testing.assert_allclose((np.linalg.eigvalsh(d + h * t) - np.linalg.eigvalsh(d)) / h, dw, atol=1e-5)
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
