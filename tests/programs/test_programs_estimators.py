"""Estimators for discrete/random operations: straight-through, Gumbel-softmax, reparam, REINFORCE;
the distributions they draw from (closed forms, integer parameters, probabilities 0 and 1)."""
import numpy as np
import pytest

import chainrule as cr
from chainrule import distributions as D
from chainrule import estimators as E

F64 = cr.float64


def test_straight_through_value_of_hard_gradient_of_soft():
    x = cr.tensor([0.2, 0.7, 1.5], dtype=cr.float64, requires_grad=True)
    soft = cr.sigmoid(x)
    y = E.straight_through(cr.round(soft), soft)
    np.testing.assert_array_equal(y.data, np.round(1 / (1 + np.exp(-x.data))))
    (y * cr.tensor([1.0, 2.0, 3.0])).sum().backward()
    s = 1 / (1 + np.exp(-x.data))
    np.testing.assert_allclose(x.grad.data, [1.0, 2.0, 3.0] * s * (1 - s), rtol=1e-12)


def test_round_ste_jvp_is_identity():
    fwd = cr.forward_ad
    with fwd.dual_level():
        y = E.round_ste(fwd.make_dual(cr.tensor([0.4, 2.6]), cr.tensor([1.0, -2.0])))
        assert fwd.unpack_dual(y).tangent.data.tolist() == [1.0, -2.0]
    assert y.data.tolist() == [0.0, 3.0]


def test_straight_through_shape_mismatch_is_clear():
    with pytest.raises(cr.ShapeError, match="straight_through: hard has shape"):
        E.straight_through(np.zeros(3), cr.tensor([1.0, 2.0]))


def test_gumbel_softmax_hard_is_one_hot_with_the_soft_gradient():
    logits = cr.tensor([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]], dtype=cr.float64, requires_grad=True)
    y_hard = E.gumbel_softmax(logits, tau=0.7, generator=np.random.default_rng(5))
    y_soft = E.gumbel_softmax(logits, tau=0.7, hard=False, generator=np.random.default_rng(5))
    assert set(np.unique(y_hard.data)) == {0.0, 1.0}
    np.testing.assert_array_equal(y_hard.data.sum(axis=-1), [1.0, 1.0])
    np.testing.assert_array_equal(y_hard.data.argmax(-1), y_soft.data.argmax(-1))
    w = cr.tensor([[1.0, -2.0, 0.5], [3.0, 0.0, 1.0]], dtype=cr.float64)
    (g_hard,) = cr.autograd.grad((y_hard * w).sum(), logits)
    (g_soft,) = cr.autograd.grad((y_soft * w).sum(), logits)
    np.testing.assert_allclose(g_hard.data, g_soft.data, rtol=1e-12)
    assert np.abs(g_soft.data).max() > 0


def test_gumbel_max_samples_follow_the_categorical():
    logits = np.log([0.2, 0.5, 0.3])
    y = E.gumbel_softmax(cr.tensor(np.tile(logits, (20000, 1))), generator=np.random.default_rng(0))
    freq = y.data.mean(axis=0)
    np.testing.assert_allclose(freq, [0.2, 0.5, 0.3], atol=0.015)


def test_distribution_log_probs_against_closed_forms():
    n = D.Normal(cr.tensor(1.0, dtype=cr.float64), cr.tensor(2.0, dtype=cr.float64))
    x = 0.3
    assert n.log_prob(cr.tensor(x, dtype=cr.float64)).item() == pytest.approx(
        -0.5 * ((x - 1) / 2) ** 2 - np.log(2) - 0.5 * np.log(2 * np.pi), rel=1e-12)
    assert n.entropy().item() == pytest.approx(0.5 + 0.5 * np.log(2 * np.pi) + np.log(2.0), rel=1e-12)
    b = D.Bernoulli(logits=cr.tensor(0.4, dtype=cr.float64))
    p = 1 / (1 + np.exp(-0.4))
    assert b.log_prob(cr.tensor(1.0, dtype=cr.float64)).item() == pytest.approx(np.log(p), rel=1e-12)
    assert b.log_prob(cr.tensor(0.0, dtype=cr.float64)).item() == pytest.approx(np.log(1 - p), rel=1e-12)
    c = D.Categorical(probs=cr.tensor([2.0, 6.0, 2.0], dtype=cr.float64))   # normalised for you
    np.testing.assert_allclose(c.log_prob(np.array([0, 1])).data, np.log([0.2, 0.6]), rtol=1e-12)
    assert c.entropy().item() == pytest.approx(-(0.4 * np.log(0.2) + 0.6 * np.log(0.6)), rel=1e-12)


def test_samplers_match_their_distributions():
    rng = np.random.default_rng(1)
    assert D.Bernoulli(probs=cr.tensor(0.3)).sample(20000, generator=rng).data.mean() == \
        pytest.approx(0.3, abs=0.01)
    counts = np.bincount(D.Categorical(logits=cr.tensor([0.0, np.log(3.0)])).sample(
        20000, generator=rng), minlength=2) / 20000
    np.testing.assert_allclose(counts, [0.25, 0.75], atol=0.01)
    z = D.Normal(cr.tensor(1.0), cr.tensor(0.5)).sample((20000,), generator=rng).data
    assert abs(z.mean() - 1.0) < 0.02 and abs(z.std() - 0.5) < 0.02


def test_rsample_is_differentiable_and_sample_is_not():
    mu = cr.tensor(0.5, requires_grad=True)
    sigma = cr.tensor(2.0, requires_grad=True)
    d = D.Normal(mu, sigma)
    z = d.rsample(generator=np.random.default_rng(0))
    z.backward()
    eps = np.random.default_rng(0).standard_normal(())
    assert mu.grad.item() == 1.0 and sigma.grad.item() == pytest.approx(eps, rel=1e-6)
    assert not d.sample().requires_grad


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="Normal: scale must be > 0"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="exactly one of probs= or logits="):
        D.Bernoulli()
    with pytest.raises(ValueError, match="probs must lie in"):
        D.Bernoulli(probs=1.5)


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


def _gaussian_report(k=4000, seed=0):
    # E_{z ~ N(mu, 1)}[z^2] = mu^2 + 1: exact gradient 2 mu
    f = lambda z: z * z                                                 # noqa: E731
    dist = lambda mu: D.Normal(mu, 1.0)                                 # noqa: E731
    ests = {"reparam": E.reparam_estimator(dist, f),
            "reinforce": E.reinforce_estimator(dist, f),
            "reinforce+baseline": E.reinforce_estimator(dist, f, baseline="mean")}
    return E.report(ests, 0.8, exact=lambda mu: mu * mu + 1.0, num_samples=k,
                    generator=np.random.default_rng(seed))


def test_gaussian_estimators_are_unbiased_and_reparam_has_lower_variance():
    r = _gaussian_report()
    assert r.exact.item() == pytest.approx(1.6)
    for name in ("reparam", "reinforce", "reinforce+baseline"):
        assert r[name].z_score < 3.0, str(r)
    assert r.ratio("reinforce", "reparam") > 2.0
    assert r.ratio("reinforce", "reinforce+baseline") > 1.2


def test_bernoulli_reinforce_unbiased_against_enumerated_gradient():
    # E_{z ~ Bern(sigmoid(t))}[(z - 0.3)^2 + 2]: enumerate z in {0, 1} for the exact gradient
    f = lambda z: (z - 0.3) ** 2 + 2.0                                  # noqa: E731
    dist = lambda t: D.Bernoulli(logits=t)                              # noqa: E731

    def expectation(t):
        p = cr.sigmoid(t)
        return p * f(1.0) + (1 - p) * f(0.0)

    ests = {"reinforce": E.reinforce_estimator(dist, f),
            "reinforce+baseline": E.reinforce_estimator(dist, f, baseline="mean")}
    r = E.report(ests, np.float64(0.25), exact=expectation, num_samples=4000,
                 generator=np.random.default_rng(3))
    s = 1 / (1 + np.exp(-0.25))
    assert r.exact.item() == pytest.approx(s * (1 - s) * (0.49 - 0.09), rel=1e-12)
    assert r["reinforce"].z_score < 3 and r["reinforce+baseline"].z_score < 3
    assert r.ratio("reinforce", "reinforce+baseline") > 10


def test_report_rejects_a_scalar_surrogate():
    with pytest.raises(cr.ShapeError, match="one surrogate per sample"):
        E.report({"bad": lambda th, gen: th.sum()}, 0.5, exact=0.0, num_samples=10)


def test_score_function_leave_one_out_baseline_values():
    lp = cr.tensor([1.0, 1.0, 1.0], requires_grad=True)
    s = E.score_function(lp, np.array([1.0, 2.0, 6.0]), baseline="mean")
    np.testing.assert_allclose(s.data, [1 - 4, 2 - 3.5, 6 - 1.5])
