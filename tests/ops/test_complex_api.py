"""Complex numbers through the rest of the API: optimizers, vdot, branch-sensitive derivatives, the
views between C and R^2, .real/.imag assignment, and the refusal of ops with no complex derivative
whose result is real."""
import numpy as np
import pytest

import chainrule as cr

Z0 = np.array([3 + 4j, -1 + 0.5j])


def test_adam_treats_real_and_imaginary_parts_as_two_parameters_as_torch():
    torch = pytest.importorskip("torch")
    p = cr.nn.Parameter(Z0.copy())
    opt = cr.optim.Adam([p], lr=0.1, weight_decay=0.01)
    t = torch.tensor(Z0.copy(), requires_grad=True)
    topt = torch.optim.Adam([t], lr=0.1, weight_decay=0.01)
    for _ in range(4):
        opt.zero_grad()
        (cr.abs(p) ** 2 + cr.real(p)).sum().backward()
        opt.step()
        topt.zero_grad()
        (t.abs() ** 2 + t.real).sum().backward()
        topt.step()
    np.testing.assert_allclose(p.data, t.detach().numpy(), rtol=1e-12)


def test_sgd_descends_with_the_convention():
    p = cr.nn.Parameter(Z0.copy())
    opt = cr.optim.SGD([p], lr=0.25)
    for _ in range(3):
        opt.zero_grad()
        (cr.abs(p) ** 2).sum().backward()            # grad 2 z: each step halves z
        opt.step()
    np.testing.assert_allclose(p.data, Z0 / 8, rtol=1e-12)


def test_vdot_conjugates_its_first_argument():
    z = cr.tensor(np.array([1 + 2j, 3 - 1j, -2 + 0.5j]), requires_grad=True)
    out = cr.vdot(z, z)
    assert out.item() == np.vdot(z.data, z.data)
    out.real.backward()
    np.testing.assert_allclose(z.grad.data, 2 * z.data)


def test_arccosh_left_of_the_imaginary_axis():
    z = cr.tensor(np.array([-2 + 1j, 0.5 - 3j]))
    _, t = cr.jvp(cr.arccosh, (z,), (cr.tensor(np.array([1 + 0j, 1j])),))
    h = 1e-6
    fd = (np.arccosh(z.data + h * np.array([1, 1j])) - np.arccosh(z.data - h * np.array([1, 1j]))) / (2 * h)
    np.testing.assert_allclose(t.data, fd, rtol=1e-8)


def test_view_as_complex_of_a_pair_and_back():
    xy = cr.tensor([3.0, 4.0], requires_grad=True)
    (cr.abs(cr.view_as_complex(xy)) ** 2).backward()   # 0-d complex: its backward views a scalar
    np.testing.assert_allclose(xy.grad.data, [6.0, 8.0])


def test_real_and_imag_assign_through_the_view():
    t = cr.tensor([1 + 2j, 3 - 1j])
    t.real *= 2
    t.imag = cr.tensor([5.0, 6.0])
    np.testing.assert_array_equal(t.data, [2 + 5j, 6 + 6j])
    assert t._version == 3          # *= writes, the assignment it implies writes, imag = writes


def test_a_real_result_of_complex_data_is_refused_where_the_op_has_no_complex_derivative():
    logits = cr.tensor(np.array([[1 + 1j, 2 - 1j]]), requires_grad=True)
    with pytest.raises(cr.DTypeError, match="softmax_cross_entropy: complex input .* no complex derivative"):
        cr.nn.functional.cross_entropy(logits, np.array([0]))
