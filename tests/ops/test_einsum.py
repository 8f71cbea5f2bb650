"""einsum with many operands: every operand is saved for the backward, however many there are."""
import string

import numpy as np
import pytest

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual

N = 12
SPEC = ",".join(string.ascii_lowercase[i:i + 2] for i in range(N)) + f"->a{string.ascii_lowercase[N]}"


def _operands(rng):
    # a chain of 12 small matrices: "ab,bc,...,lm->am"
    return [cr.tensor(rng.uniform(0.5, 1.5, (2, 2)), dtype=cr.float64, requires_grad=True)
            for _ in range(N)]


def test_twelve_operands_backward_matches_finite_differences(rng):
    xs = _operands(rng)
    assert cr.gradcheck(lambda *ops: cr.einsum(SPEC, *ops), xs, modes=("rev", "fwd"))


def test_twelve_operands_backward_matches_torch(rng):
    torch = pytest.importorskip("torch")
    xs = _operands(rng)
    v = rng.standard_normal((2, 2))
    cr.einsum(SPEC, *xs).backward(cr.tensor(v))
    txs = [torch.tensor(x.data, requires_grad=True) for x in xs]
    torch.einsum(SPEC, *txs).backward(torch.tensor(v))
    for x, tx in zip(xs, txs):
        np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_twelve_operands_jvp_is_adjoint_to_the_vjp(rng):
    xs = _operands(rng)
    us = [rng.standard_normal((2, 2)) for _ in xs]
    v = rng.standard_normal((2, 2))
    grads = cr.autograd.grad(cr.einsum(SPEC, *xs), xs, grad_outputs=v)
    with dual_level():
        tangent = unpack_dual(cr.einsum(SPEC, *[make_dual(x.detach(), cr.tensor(u))
                                                for x, u in zip(xs, us)])).tangent
    reverse = sum(float(np.sum(g.data * u)) for g, u in zip(grads, us))
    assert float(np.sum(v * tangent.data)) == pytest.approx(reverse, rel=1e-12)
