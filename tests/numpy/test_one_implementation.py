"""One implementation per public name of linear algebra: ``cr.X is cr.linalg.X``, ``Tensor.norm`` is
``cr.linalg.norm``, each with the complete signature (cholesky's ``upper=``, slogdet of complex
input, every ``ord`` of ``numpy.linalg.norm``), and one primitive per rule (cholesky, logdet)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import chainrule as cr

_SHORT = ("cholesky", "slogdet", "norm", "det", "inv", "solve", "eigh", "svd", "qr")


@pytest.mark.parametrize("name", _SHORT)
def test_short_names_are_the_linalg_functions(name):
    if not hasattr(cr, name):
        pytest.skip(f"cr.{name} is only cr.linalg.{name}")
    assert getattr(cr, name) is getattr(cr.linalg, name)
    assert getattr(cr.numpy, name) is getattr(cr.linalg, name)


def test_tensor_norm_is_linalg_norm():
    assert cr.Tensor.norm is cr.linalg.norm
    def params(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]
    assert params(cr.Tensor.norm) == params(np.linalg.norm)        # NumPy's (x, ord, axis, keepdims)
    x = cr.tensor(np.arange(6.0).reshape(2, 3))
    assert float(x.norm(ord="nuc")) == pytest.approx(np.linalg.norm(x.data, "nuc"), rel=1e-12)
    assert float(np.linalg.norm(x, "nuc")) == pytest.approx(np.linalg.norm(x.data, "nuc"), rel=1e-12)


def test_one_primitive_per_rule():
    assert "cholesky_hermitian" not in cr.PRIMITIVES and "logabsdet" not in cr.PRIMITIVES
    assert cr.PRIMITIVES["cholesky"].complex == "own"
    assert cr.PRIMITIVES["logdet"].complex == "holomorphic"


_rng = np.random.default_rng(0)
_V = _rng.standard_normal(5)
_M = _rng.standard_normal((3, 4))
_B = _rng.standard_normal((2, 3, 4))
_VECTOR_ORDS = (None, 0, 1, -1, 2, -2, np.inf, -np.inf, 0.5, 3, -1.5)
_MATRIX_ORDS = (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)
_CASES = ([(_V, o, None) for o in _VECTOR_ORDS] + [(_B, o, a) for o in _VECTOR_ORDS for a in (0, -1)]
          + [(_M, o, None) for o in _MATRIX_ORDS] + [(_B, o, a) for o in _MATRIX_ORDS for a in ((1, 2), (2, 0))]
          + [(_B, None, None), (_M + 1j * _M[::-1], "nuc", None), (_V + 2j, 3, None), (_M + 1j, 1, (1, 0))])


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("x, ord, axis", _CASES)
def test_tensor_norm_matches_numpy_for_every_ord(x, ord, axis, keepdims):
    want = np.linalg.norm(x, ord, axis, keepdims)
    got = cr.tensor(x).norm(ord, axis, keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.data, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cr.norm(x, ord=ord, axis=axis, keepdims=keepdims), want, rtol=1e-12, atol=1e-14)


def test_integer_input_norms_in_float64():
    x = np.array([[1, -2], [3, 4]])
    for ord in (None, 1, "fro", np.inf):
        got = cr.norm(cr.tensor(x), ord)
        assert got.dtype == cr.float64
        np.testing.assert_allclose(got.data, np.linalg.norm(x, ord), rtol=1e-15)


@pytest.mark.parametrize("call, match", [
    (lambda: cr.norm(cr.tensor(_B), 2), "1-D or 2-D"),             # NumPy: "Improper number of dimensions"
    (lambda: cr.norm(cr.tensor(_V), "fro"), "not a vector norm order"),
    (lambda: cr.norm(cr.tensor(_M), 3), "invalid norm order 3"),
    (lambda: cr.norm(cr.tensor(_B), None, (0, 1, 2)), "an int or a pair"),
])
def test_norm_refuses_what_numpy_refuses(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _central(f, x, eps=1e-6):
    """d f / d x by central differences (x real; f real scalar)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def _grad(fn, x):
    t = cr.tensor(x, requires_grad=True)
    fn(t).backward()
    return t.grad.data


@pytest.mark.parametrize("ord, axis", [(None, None), (1, 1), (3, 0), (-1.5, 1), (np.inf, 1), ("fro", None),
                                       ("nuc", None), (2, None), (-2, None), (1, None), (-np.inf, None)])
def test_norm_gradients_match_central_differences(ord, axis):
    x = _rng.standard_normal((3, 4))
    want = _central(lambda v: np.linalg.norm(v, ord, axis).sum(), x)
    np.testing.assert_allclose(_grad(lambda t: t.norm(ord, axis).sum(), x), want, rtol=1e-6, atol=1e-8)


def _spd(n):
    a = _rng.standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_upper_values_and_gradients(upper):
    a = _spd(4)
    w = _rng.standard_normal((4, 4))
    got = cr.cholesky(cr.tensor(a), upper=upper)
    np.testing.assert_allclose(got.data, np.linalg.cholesky(a, upper=upper), rtol=1e-13)

    def loss(m):                     # symmetrised input: the gradient of a function of a Hermitian x
        return (cr.cholesky((m + m.T) * 0.5, upper=upper) * w).sum()
    want = _central(lambda m: (np.linalg.cholesky((m + m.T) / 2, upper=upper) * w).sum(), a)
    np.testing.assert_allclose(_grad(loss, a), want, rtol=1e-6, atol=1e-8)
    torch = pytest.importorskip("torch")
    ta = torch.tensor(a, requires_grad=True)
    (torch.linalg.cholesky(ta, upper=upper) * torch.tensor(w)).sum().backward()
    x = cr.tensor(a, requires_grad=True)
    (cr.cholesky(x, upper=upper) * w).sum().backward()
    np.testing.assert_allclose(x.grad.data, ta.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_cholesky_upper_is_keyword_only_as_numpy():
    with pytest.raises(TypeError):
        cr.cholesky(cr.tensor(_spd(2)), True)


def test_slogdet_of_complex_input_matches_numpy_with_gradients():
    z = _rng.standard_normal((2, 3, 3)) + 1j * _rng.standard_normal((2, 3, 3))
    sign, logabsdet = cr.slogdet(cr.tensor(z))
    ref = np.linalg.slogdet(z)
    np.testing.assert_allclose(sign.data, ref.sign, rtol=1e-13)
    np.testing.assert_allclose(logabsdet.data, ref.logabsdet, rtol=1e-13)
    # z.grad = dL/dX + i dL/dY for the real loss L = sum(log|det z|)
    x, y = z.real, z.imag
    want = (_central(lambda v: np.linalg.slogdet(v + 1j * y).logabsdet.sum(), x)
            + 1j * _central(lambda v: np.linalg.slogdet(x + 1j * v).logabsdet.sum(), y))
    t = cr.tensor(z, requires_grad=True)
    cr.slogdet(t).logabsdet.sum().backward()
    np.testing.assert_allclose(t.grad.data, want, rtol=1e-6, atol=1e-8)


def test_slogdet_of_real_input_and_its_gradient():
    a = _rng.standard_normal((3, 3))
    sign, logabsdet = cr.slogdet(cr.tensor(a))
    assert sign.data == np.linalg.slogdet(a).sign and logabsdet.dtype == cr.float64
    want = _central(lambda v: np.linalg.slogdet(v).logabsdet, a)
    np.testing.assert_allclose(_grad(lambda t: cr.slogdet(t).logabsdet, a), want, rtol=1e-6, atol=1e-8)
    with pytest.raises(cr.ShapeError, match=r"slogdet: needs square matrices .*\(2, 3\)"):
        cr.slogdet(cr.tensor(np.ones((2, 3))))
