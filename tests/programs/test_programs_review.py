"""Review fixes: distributions' parameter dtypes and edge probabilities; implicit solves that must
raise instead of returning a silently wrong derivative."""
import numpy as np
import pytest

import chainrule as cr

F64 = cr.float64


# ----- distributions -----

def test_normal_with_integer_parameters_samples_floats():
    d = cr.distributions.Normal(0, 1)
    z = d.rsample((1000,), generator=np.random.default_rng(0))
    assert z.dtype == cr.get_default_dtype()
    assert 0.8 < float(np.std(z.data)) < 1.2          # was all zeros: eps cast to int64


@pytest.mark.parametrize("cls,kw", [(cr.distributions.Bernoulli, {"probs": 1}),
                                    (cr.distributions.Categorical, {"probs": [1, 3]})])
def test_integer_probs_are_accepted(cls, kw):
    d = cls(**kw)
    assert np.isfinite(np.asarray(d.logits.data)).all()


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_bernoulli_log_prob_is_finite_at_probs_zero_and_one(p):
    d = cr.distributions.Bernoulli(probs=cr.tensor(p, dtype=F64))
    taken = d.log_prob(cr.tensor(p, dtype=F64))        # the certain outcome: log 1 = 0
    assert abs(taken.item()) < 1e-12                   # was nan at p = 1 (inf - inf)
    assert np.isfinite(d.entropy().item()) and abs(d.entropy().item()) < 1e-12


def test_bernoulli_probs_gradient_unchanged_inside():
    p = cr.tensor(0.3, dtype=F64, requires_grad=True)
    cr.distributions.Bernoulli(probs=p).log_prob(1.0).backward()
    np.testing.assert_allclose(p.grad.item(), 1 / 0.3)


# ----- implicit differentiation -----

def _solve(a):
    return cr.fixed_point(lambda z, a: a * cr.cos(z), cr.tensor(0.0, dtype=F64), a)


def test_fixed_point_closing_over_a_parameter_raises_instead_of_dropping_its_gradient():
    W = cr.tensor([[0.3, 0.1], [0.0, 0.2]], dtype=F64, requires_grad=True)
    b = cr.tensor([1.0, 1.0], dtype=F64, requires_grad=True)
    z = cr.fixed_point(lambda z, b: cr.tanh(W @ z + b), cr.zeros(2, dtype=F64), b)
    with pytest.raises(cr.GraphError, match=r"closes over 1 tensor.*\(2, 2\).*Pass them as params"):
        z.sum().backward()


def test_fixed_point_with_parameters_passed_explicitly_still_works():
    W = cr.tensor([[0.3, 0.1], [0.0, 0.2]], dtype=F64, requires_grad=True)
    b = cr.tensor([1.0, 1.0], dtype=F64, requires_grad=True)
    z = cr.fixed_point(lambda z, W, b: cr.tanh(W @ z + b), cr.zeros(2, dtype=F64), W, b)
    z.sum().backward()
    assert W.grad is not None and b.grad is not None


def test_fixed_point_closing_over_a_dual_raises_under_forward_mode():
    def g(a):
        return cr.fixed_point(lambda z: a * cr.cos(z), cr.tensor(0.0, dtype=F64))
    with pytest.raises(cr.GraphError, match="forward-mode tangent"):
        cr.jvp(g, (0.5,), (1.0,))                      # was a tangent of exactly 0


@pytest.mark.parametrize("second_order", [
    lambda: cr.hvp(_solve, (0.5,), (1.0,))[0],
    lambda: cr.hessian(_solve)(0.5),
    lambda: cr.jvp(lambda a: cr.jvp(_solve, (a,), (1.0,))[1], (0.5,), (1.0,))[1],
    lambda: cr.jacfwd(cr.jacfwd(_solve))(0.5),
    lambda: cr.grad(lambda a: cr.jvp(_solve, (a,), (1.0,))[1])(0.5),
    lambda: cr.jacrev(cr.jacfwd(_solve))(0.5),
], ids=["hvp", "hessian", "jvp-jvp", "jacfwd-jacfwd", "grad-jvp", "jacrev-jacfwd"])
def test_second_order_through_implicit_solve_matches_central_differences(second_order):
    # all of these once returned 0, then raised; now the solve's second-order terms are solves too
    h = 1e-5
    fd = (cr.grad(_solve)(0.5 + h) - cr.grad(_solve)(0.5 - h)) / (2 * h)       # about -0.73
    np.testing.assert_allclose(float(np.asarray(second_order())), fd, rtol=1e-6)


def test_first_order_jvp_with_parameter_requiring_grad_still_works():
    a = cr.tensor(0.5, dtype=F64, requires_grad=True)
    _, t = cr.jvp(_solve, (a,), (cr.tensor(1.0, dtype=F64),))
    np.testing.assert_allclose(t.item(), cr.grad(_solve)(0.5), rtol=1e-8)
