"""Complex inputs and outputs in the function transforms.

PyTorch's convention throughout: for a real L of z = x + iy, grad returns dL/dx + i dL/dy (what
``z.grad`` holds after ``L.backward()``); a VJP is J^H v, a JVP is J t. With ``holomorphic=True``,
grad/jacfwd/jacrev/jacobian/hessian return f'(z) (JAX's option) and need complex inputs and outputs;
without it a complex output (and, for the Jacobian transforms, a complex input) is an error.

JAX's convention differs for real losses: ``jax.grad(lambda z: abs(z) ** 2)(3 + 4j)`` is 6 - 8j,
the conjugate of ours and PyTorch's 6 + 8j (JAX returns dL/dx - i dL/dy, the cotangent of the real
linear map). For holomorphic functions both libraries return f'(z) under ``holomorphic=True``.
"""
import numpy as np
import pytest

import chainrule as cr

rng = np.random.default_rng(11)
Z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
A = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
z0 = 0.7 - 1.3j


def close(a, b, rtol=1e-13):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=rtol * np.max(np.abs(b)))


def agree(a, b):
    """jacfwd and jacrev: equal to the last rounding (NumPy's SIMD complex product is not even
    commutative bit for bit, so a chain of products may round differently in the two modes)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-15, atol=1e-15 * np.max(np.abs(b)))


# ----- real losses of complex inputs: PyTorch's z.grad -----

def test_grad_of_abs_squared_is_2z():
    # to the last bit up to NumPy's complex division in sgn(z) = z / |z| (torch gives 6 + 8j exactly)
    close(cr.grad(lambda z: cr.abs(z) ** 2)(np.array(3 + 4j)), 6 + 8j, rtol=1e-15)
    z = cr.tensor([3 + 4j], requires_grad=True)
    (z.abs() ** 2).sum().backward()
    g = cr.grad(lambda z: (cr.abs(z) ** 2).sum())(cr.tensor([3 + 4j]))
    assert isinstance(g, cr.Tensor) and g.dtype == np.complex64
    np.testing.assert_array_equal(g.data, z.grad.data)


def test_grad_of_real_loss_matches_backward_and_finite_differences():
    def loss(z):
        return (cr.abs(cr.sin(z) * (A @ z)[:1]) ** 2).sum() + (cr.exp(z).imag * z.real).sum()

    g = cr.grad(loss)(Z)
    z = cr.tensor(Z, requires_grad=True)
    loss(z).backward()
    np.testing.assert_array_equal(g, z.grad.data)
    # dL/dx + i dL/dy by central differences
    eps, num = 1e-6, np.zeros(4, complex)
    for k in range(4):
        e = np.zeros(4)
        e[k] = eps
        dx = (loss(Z + e) - loss(Z - e)) / (2 * eps)
        dy = (loss(Z + 1j * e) - loss(Z - 1j * e)) / (2 * eps)
        num[k] = dx + 1j * dy
    close(g, num, rtol=1e-7)


def test_grad_of_real_loss_mixed_real_and_complex_arguments():
    def loss(z, w):
        return (cr.abs(z * w) ** 2).sum()

    w = np.array([2.0, -1.0, 0.5, 3.0])
    gz, gw = cr.grad(loss, argnums=(0, 1))(Z, w)
    close(gz, 2 * Z * w ** 2)
    close(gw, 2 * w * np.abs(Z) ** 2)
    assert gz.dtype == np.complex128 and gw.dtype == np.float64
    value, g = cr.value_and_grad(loss)(Z, w)
    close(value, loss(Z, w))
    close(g, gz)


def test_hvp_of_real_loss_of_complex_input_is_the_real_hessian_packed():
    # L = sum |z|^2 + x*y: per element H = [[2, 1], [1, 2]] on (x, y)
    def loss(z):
        return (cr.abs(z) ** 2).sum() + (z.real * z.imag).sum()

    (hv,) = cr.hvp(loss, (Z[:2],), (np.array([1 + 0j, 1j]),))
    close(hv, np.array([2 + 1j, 1 + 2j]))


# ----- holomorphic derivatives -----

def test_grad_holomorphic_against_analytic_derivatives():
    cases = [
        (lambda z: z ** 3 + cr.exp(z), lambda z: 3 * z ** 2 + np.exp(z)),
        (lambda z: cr.sin(z) * z, lambda z: np.cos(z) * z + np.sin(z)),
        (lambda z: 1 / (1 + z ** 2), lambda z: -2 * z / (1 + z ** 2) ** 2),
        (lambda z: cr.log(z) * cr.tanh(z), lambda z: np.tanh(z) / z + np.log(z) / np.cosh(z) ** 2),
    ]
    for f, df in cases:
        for z in (z0, 0.5j, -2.0 + 0.5j):
            close(cr.grad(f, holomorphic=True)(np.array(z)), df(z))
            value, g = cr.value_and_grad(f, holomorphic=True)(np.array(z))
            close(value, f(np.array(z)))
            close(g, df(z))


def test_grad_holomorphic_is_the_conjugate_of_the_vjp_of_one():
    f = lambda z: z ** 3 + cr.exp(z)            # noqa: E731
    _, vjp_fn = cr.vjp(f, np.array(z0))
    (v,) = vjp_fn(np.array(1 + 0j))
    np.testing.assert_array_equal(cr.grad(f, holomorphic=True)(np.array(z0)), np.conj(v))
    _, t = cr.jvp(f, (np.array(z0),), (np.array(1 + 0j),))
    close(t, 3 * z0 ** 2 + np.exp(z0))


def test_grad_holomorphic_argnums_tuple_has_aux_and_tensors():
    def f(z, w):
        return z ** 2 * w, {"aux": z}

    (gz, gw), aux = cr.grad(f, argnums=(0, 1), has_aux=True, holomorphic=True)(np.array(z0), np.array(2j))
    close(gz, 2 * z0 * 2j)
    close(gw, z0 ** 2)
    assert aux["aux"] == z0
    g = cr.grad(lambda z: z ** 2, holomorphic=True)(cr.tensor(np.array(z0)))
    assert isinstance(g, cr.Tensor)
    close(g.data, 2 * z0)


def test_matrix_function_jacobian_is_the_matrix():
    f = lambda z: A @ z                         # noqa: E731
    for J in (cr.jacfwd(f, holomorphic=True)(Z), cr.jacrev(f, holomorphic=True)(Z),
              cr.jacobian(f, holomorphic=True)(Z)):
        assert J.shape == (3, 4) and J.dtype == np.complex128
        close(J, A, rtol=1e-15)


HOLOMORPHIC = {
    "cube_exp": (lambda z: z ** 3 + cr.exp(z), lambda z: np.diag(3 * z ** 2 + np.exp(z))),
    "sin_z": (lambda z: cr.sin(z) * z, lambda z: np.diag(np.cos(z) * z + np.sin(z))),
    "matmul": (lambda z: A @ z, lambda z: A),
    "outer": (lambda z: (z ** 2).sum() * z,
              lambda z: np.outer(z, 2 * z) + np.eye(len(z)) * (z ** 2).sum()),
    "tanh_mix": (lambda z: cr.tanh(A @ z) * z[0],
                 lambda z: A / np.cosh(A @ z)[:, None] ** 2 * z[0] + np.outer(np.tanh(A @ z), np.eye(4)[0])),
    "rational": (lambda z: 1 / (1 + z ** 2) - cr.cos(z) * cr.sqrt(z),
                 lambda z: np.diag(-2 * z / (1 + z ** 2) ** 2 + np.sin(z) * np.sqrt(z)
                                   - np.cos(z) / (2 * np.sqrt(z)))),
    "scalar_out": (lambda z: (cr.exp(z) * z).sum(), lambda z: np.exp(z) * (z + 1)),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_jacfwd_and_jacrev_agree_and_match_the_analytic_jacobian(name):
    f, jac = HOLOMORPHIC[name]
    Jf = cr.jacfwd(f, holomorphic=True)(Z)
    Jr = cr.jacrev(f, holomorphic=True)(Z)
    agree(Jf, Jr)
    close(Jf, jac(Z))
    J = cr.jacobian(f, holomorphic=True)
    for mode in ("forward", "reverse"):
        agree(cr.jacobian(f, mode=mode, holomorphic=True)(Z), Jf)
    agree(J(Z), Jf)


def test_jacfwd_and_jacrev_bitwise_equal_where_no_product_chain_is_reordered():
    for f in (lambda z: z ** 3 + cr.exp(z), lambda z: A @ z, lambda z: cr.exp(z) * 2j - z):
        np.testing.assert_array_equal(cr.jacfwd(f, holomorphic=True)(Z), cr.jacrev(f, holomorphic=True)(Z))


def test_jacobians_of_pytrees_holomorphic():
    def f(z, w):
        return {"a": z * w[0], "b": (w ** 2).sum()}

    w = np.array([1 + 1j, 2 - 1j])
    Jf = cr.jacfwd(f, argnums=(0, 1), holomorphic=True)(Z, w)
    Jr = cr.jacrev(f, argnums=(0, 1), holomorphic=True)(Z, w)
    for key in ("a", "b"):
        for i in range(2):
            agree(Jf[key][i], Jr[key][i])
    close(Jf["a"][0], np.diag(np.full(4, w[0])))
    close(Jf["a"][1], np.outer(Z, [1, 0]))
    close(Jf["b"][1], 2 * w)


def test_hessian_holomorphic_of_z4_is_12z2():
    close(cr.hessian(lambda z: z ** 4, holomorphic=True)(np.array(z0)), 12 * z0 ** 2)
    H = cr.hessian(lambda z: (z ** 4).sum() + z[0] * z[1] ** 2, holomorphic=True)(Z)
    want = np.diag(12 * Z ** 2)
    want[0, 1] += 2 * Z[1]
    want[1, 0] += 2 * Z[1]
    want[1, 1] += 2 * Z[0]
    close(H, want)
    # f'' as a nested grad as well
    d2 = cr.grad(cr.grad(lambda z: z ** 4, holomorphic=True), holomorphic=True)(np.array(z0))
    close(d2, 12 * z0 ** 2)


def test_holomorphic_grad_through_an_outer_graph():
    # L = |f'(z)|^2 with f = z^4: z.grad = 2 f'(z) conj(f''(z)) under PyTorch's convention
    z = cr.tensor(np.array([z0, 1j]), requires_grad=True)
    g = cr.jacrev(lambda z: z ** 4, holomorphic=True)(z)
    assert g.requires_grad
    (cr.abs(cr.diagonal(g)) ** 2).sum().backward()
    zz = np.array([z0, 1j])
    close(z.grad.data, 2 * (4 * zz ** 3) * np.conj(12 * zz ** 2))


# ----- errors -----

def test_complex_output_without_holomorphic_is_an_error():
    msg = r"grad: output is complex \(complex128\).*holomorphic=True.*\.real.*abs"
    with pytest.raises(cr.DTypeError, match=msg):
        cr.grad(lambda z: z ** 2)(np.array(z0))
    with pytest.raises(cr.DTypeError, match=r"value_and_grad: output is complex"):
        cr.value_and_grad(lambda x: x * 1j)(1.0)
    for jac in (cr.jacfwd, cr.jacrev):
        name = jac.__name__
        # a real input with a complex output
        with pytest.raises(cr.DTypeError, match=rf"{name}: output\[1\] is complex.*holomorphic=True"
                                                r".*real and imaginary parts"):
            jac(lambda x: (x, x * 1j))(np.ones(2))


def test_complex_input_to_a_jacobian_without_holomorphic_is_an_error():
    for who, jac in (("jacfwd", cr.jacfwd), ("jacrev", cr.jacrev), ("jacobian", cr.jacobian),
                     ("hessian", cr.hessian)):
        msg = rf"{who}: argument 0 is complex \(complex128.*holomorphic=True.*real and imaginary parts"
        with pytest.raises(cr.DTypeError, match=msg):
            jac(lambda z: (cr.abs(z) ** 2).sum())(Z)
    with pytest.raises(cr.DTypeError, match=r"jacrev: argument 1 is complex"):
        cr.jacrev(lambda x, z: x * cr.abs(z), argnums=(0, 1))(np.ones(2), Z[:2])


def test_holomorphic_requires_complex_inputs_and_outputs():
    with pytest.raises(cr.DTypeError, match=r"grad: holomorphic=True requires complex inputs, but "
                                            r"argument 0 is float64"):
        cr.grad(lambda x: x ** 2, holomorphic=True)(1.0)
    with pytest.raises(cr.DTypeError, match=r"grad: holomorphic=True requires complex outputs, but "
                                            r"output is float64"):
        cr.grad(lambda z: cr.abs(z) ** 2, holomorphic=True)(np.array(z0))
    for jac in (cr.jacfwd, cr.jacrev, cr.hessian):
        with pytest.raises(cr.DTypeError, match="holomorphic=True requires complex inputs"):
            jac(lambda x: x * 1j, holomorphic=True)(np.ones(2))
    for jac in (cr.jacfwd, cr.jacrev):
        with pytest.raises(cr.DTypeError, match=r"holomorphic=True requires complex outputs.*output\[0\]"):
            jac(lambda z: (cr.abs(z), z), holomorphic=True)(Z)


# ----- vjp / jvp follow PyTorch's convention -----

def test_vjp_is_j_hermitian_v_and_jvp_is_j_t():
    f = lambda z: A @ cr.sin(z)                 # noqa: E731
    J = A * np.cos(Z)[None, :]
    v = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    t = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    out, vjp_fn = cr.vjp(f, Z)
    close(out, A @ np.sin(Z))
    close(vjp_fn(v)[0], J.conj().T @ v)
    close(cr.jvp(f, (Z,), (t,))[1], J @ t)
    z = cr.tensor(Z, requires_grad=True)
    f(z).backward(v)
    close(z.grad.data, J.conj().T @ v)


# ----- torch as a second oracle for real losses of complex inputs -----

def test_grad_of_real_losses_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    At = torch.as_tensor(A)
    losses = [
        (lambda z: (cr.abs(z) ** 2).sum(), lambda z: (z.abs() ** 2).sum()),
        (lambda z: cr.abs(A @ cr.exp(z)).sum(), lambda z: (At @ torch.exp(z)).abs().sum()),
        (lambda z: (cr.sin(z) * z).real.sum() + (z ** 3).imag.sum(),
         lambda z: (torch.sin(z) * z).real.sum() + (z ** 3).imag.sum()),
        (lambda z: (cr.angle(z) * cr.abs(cr.conj(z) * z[0])).sum(),
         lambda z: (torch.angle(z) * (z.conj() * z[0]).abs()).sum()),
    ]
    for ours, theirs in losses:
        zt = torch.tensor(Z, requires_grad=True)
        (gt,) = torch.autograd.grad(theirs(zt), zt)
        close(cr.grad(ours)(Z), gt.numpy(), rtol=1e-12)
    zt = torch.tensor(3 + 4j, requires_grad=True)
    (zt.abs() ** 2).backward()
    close(cr.grad(lambda z: cr.abs(z) ** 2)(np.array(3 + 4j)), zt.grad.numpy(), rtol=1e-15)
