"""The op table, checked exhaustively: every primitive's VJP and JVP against central differences in
float64, against each other (duality), to second order, and against PyTorch where installed."""
import numpy as np
import pytest
from op_specs import NONDIFF_SPECS, OP_SPECS, ZERO_GRAD

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual

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
    getattr(cr, name)(x).sum().backward()
    assert np.array_equal(x.grad.data, np.zeros((3, 4)))


def test_every_primitive_has_a_spec():
    covered = {s.name for s in OP_SPECS} | set(NONDIFF_SPECS)
    missing = set(cr.PRIMITIVES) - covered
    assert not missing, f"primitives without an OpSpec: {sorted(missing)}"


def test_op_table_size():
    differentiable = [p for p in cr.PRIMITIVES.values() if p.vjps is not None]
    assert len(differentiable) >= 70
