"""The op table, checked exhaustively: every primitive's VJP and JVP against central differences in
float64, against each other (duality), to second order, and against PyTorch where installed."""
import numpy as np
import pytest

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual
from tests.op_specs import NONDIFF_SPECS, OP_SPECS, ZERO_GRAD

SPECS = pytest.mark.parametrize("spec", OP_SPECS, ids=str)


@SPECS
def test_vjp_matches_central_differences(spec, rng):
    assert cr.gradcheck(spec.fn, spec.sample(rng), modes=("rev",))


@SPECS
def test_jvp_matches_central_differences(spec, rng):
    assert cr.gradcheck(spec.fn, spec.sample(rng), modes=("fwd",))


@SPECS
def test_jvp_and_vjp_are_adjoint(spec, rng):
    """<v, J u> from forward mode equals <J^T v, u> from reverse mode, without finite differences."""
    xs = spec.sample(rng)
    us = [rng.standard_normal(x.shape) for x in xs]
    out = spec.fn(*xs)
    v = rng.standard_normal(out.shape)
    grads = cr.autograd.grad(out, xs, grad_outputs=v, allow_unused=True)
    reverse = sum(float(np.sum(g.data * u)) for g, u in zip(grads, us) if g is not None)
    with dual_level():
        duals = [make_dual(x.detach(), cr.tensor(u)) for x, u in zip(xs, us)]
        tangent = unpack_dual(spec.fn(*duals)).tangent
    forward = float(np.sum(v * tangent.data)) if tangent is not None else 0.0
    assert forward == pytest.approx(reverse, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("spec", [s for s in OP_SPECS if s.order >= 2 and s.name not in ZERO_GRAD], ids=str)
def test_second_order(spec, rng):
    assert cr.gradgradcheck(spec.fn, spec.sample(rng))


@pytest.mark.parametrize("spec", [s for s in OP_SPECS if s.torch_fn is not None], ids=str)
def test_matches_torch(spec, rng):
    torch = pytest.importorskip("torch")
    xs = spec.sample(rng)
    out = spec.fn(*xs)
    v = rng.standard_normal(out.shape)
    out.backward(cr.tensor(v))
    txs = [torch.tensor(x.data, requires_grad=True) for x in xs]
    tout = spec.torch_fn(*txs)
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    tout.backward(torch.tensor(v))
    for x, tx in zip(xs, txs):
        expected = np.zeros(x.shape) if tx.grad is None else tx.grad.numpy()
        np.testing.assert_allclose(x.grad.data, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(NONDIFF_SPECS))
def test_nondifferentiable_results_do_not_require_grad(name, rng):
    x = cr.tensor(rng.uniform(-2, 2, (3, 4)), requires_grad=True)
    out = NONDIFF_SPECS[name](x)
    assert not out.requires_grad and out.grad_fn is None


@pytest.mark.parametrize("name", sorted(ZERO_GRAD))
def test_piecewise_constant_ops_have_zero_gradient(name, rng):
    x = cr.tensor(rng.uniform(-2, 2, (3, 4)), requires_grad=True)
    ZERO_GRAD[name](x).sum().backward()
    assert np.array_equal(x.grad.data, np.zeros((3, 4)))


def test_every_primitive_has_a_spec():
    covered = {s.name for s in OP_SPECS} | set(NONDIFF_SPECS)
    missing = set(cr.PRIMITIVES) - covered
    assert not missing, f"primitives without an OpSpec: {sorted(missing)}"


def test_op_table_size():
    differentiable = [p for p in cr.PRIMITIVES.values() if p.vjps is not None]
    assert len(differentiable) >= 70


def _keeps_zero(name):
    return any(getattr(r, "keeps_zero", False) for r in cr.PRIMITIVES[name].vjps or ())


GUARDED = [s for s in OP_SPECS if _keeps_zero(s.name)]


def test_the_guarded_rules_are_found():
    assert {"log", "sqrt", "divide", "power", "arctan2", "reciprocal"} <= {s.name for s in GUARDED}


def _residual_line(spec, rng):
    """phi(s) = 1/2 sum(w (op(x0 + s v) - op(x0))^2): at s = 0 every cotangent reaching op is 0."""
    x0 = [x.data for x in spec.sample(rng)]
    vs = [rng.standard_normal(x.shape) for x in x0]
    c = spec.fn(*[cr.tensor(x) for x in x0]).data
    w = rng.uniform(0.5, 1.5, c.shape)

    def phi(s):
        r = spec.fn(*[x + s * v for x, v in zip(x0, vs)]) - c
        return 0.5 * (w * r * r).sum()
    return phi


@pytest.mark.parametrize("spec", GUARDED, ids=str)
def test_zero_cotangent_guard_leaves_higher_derivatives_exact(spec, rng):
    """The guard changes nothing where the local derivative is finite: second and third
    derivatives at a point where all cotangents are exactly 0 equal the unguarded ones and central
    differences of the (guard-free) first derivative, in reverse-over-reverse and forward-over-reverse."""
    phi = _residual_line(spec, rng)
    s0 = cr.tensor(0.0, dtype=cr.float64)
    d1, d2 = cr.grad(phi), cr.grad(cr.grad(phi))
    d3_rev = cr.grad(cr.grad(cr.grad(phi)))
    guarded = [float(d2(s0)), float(d3_rev(s0)), float(cr.jvp(d2, (s0,), (1.0,))[1])]
    prev = cr.set_safe_zero_cotangents(False)
    try:
        unguarded = [float(d2(s0)), float(d3_rev(s0)), float(cr.jvp(d2, (s0,), (1.0,))[1])]
    finally:
        cr.set_safe_zero_cotangents(prev)
    h = 1e-4
    fp, f0, fm = (float(d1(cr.tensor(s, dtype=cr.float64))) for s in (h, 0.0, -h))
    numeric = [(fp - fm) / (2 * h), (fp - 2 * f0 + fm) / h**2, (fp - 2 * f0 + fm) / h**2]
    assert guarded[0] > 0                               # J^T W J v: never 0 along a random v
    np.testing.assert_allclose(guarded, unguarded, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(guarded, numeric, rtol=1e-5, atol=1e-5)


def test_zero_cotangent_guard_reproducers():
    assert cr.grad(cr.grad(lambda x: (x / 2) ** 2))(0.0) == pytest.approx(0.5)
    x0 = cr.tensor(0.0, dtype=cr.float64)
    assert float(cr.hessian(lambda x: cr.log(1 + x) ** 2)(x0)) == pytest.approx(2.0)
    assert float(cr.hvp(lambda x: cr.log(1 + x) ** 2, (x0,), (1.0,))[0]) == pytest.approx(2.0)
    d4 = cr.grad(cr.grad(cr.grad(cr.grad(cr.tanh))))
    assert float(d4(x0)) == 0.0 and float(cr.grad(cr.grad(cr.grad(cr.tanh)))(x0)) == -2.0
    # where the local derivative is infinite the guard still gives 0, not NaN, to every order
    x = cr.tensor([-1.0, 0.0, 4.0], dtype=cr.float64, requires_grad=True)
    (g,) = cr.autograd.grad(cr.where(x > 0, cr.sqrt(x), 0.0).sum(), x, create_graph=True)
    (gg,) = cr.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(g.data, [0.0, 0.0, 0.25])
    np.testing.assert_array_equal(gg.data, [0.0, 0.0, -1 / 32])
