"""Gradient estimators for discrete and random operations.

``round``, ``floor``, ``sign`` have zero gradient and ``argmax``/sampling none; these give useful
surrogates instead: straight-through (``straight_through``, ``round_ste``, ``gumbel_softmax``), the
reparameterization trick (``Normal.rsample``, wrapped by ``reparam_estimator``) and the
score-function / REINFORCE estimator (``score_function``, ``reinforce_estimator``). ``report``
measures each estimator's bias and variance against an exact gradient.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from chainrule import numpy as ops
from chainrule.autograd.function import Function
from chainrule.core._backend import np
from chainrule.core._registry import raw
from chainrule.core.errors import ShapeError
from chainrule.core.random import get_generator
from chainrule.core.tensor import Tensor, wrap
from chainrule.numpy import as_tensor

__all__ = ["EstimatorStats", "Report", "gumbel_softmax", "reinforce_estimator", "reparam_estimator", "report",
           "round_ste", "score_function", "straight_through"]


class _StraightThrough(Function):
    """Forward: ``hard``; backward and forward-mode: the derivative of ``soft``."""

    @staticmethod
    def forward(ctx: Any, hard: Any, soft: Any) -> Tensor:
        return wrap(np.array(raw(hard), dtype=raw(soft).dtype))

    @staticmethod
    def backward(ctx: Any, g: Any) -> tuple:
        return None, g

    @staticmethod
    def jvp(ctx: Any, t_hard: Any, t_soft: Any) -> Any:
        return t_soft


def straight_through(hard: Any, soft: Any) -> Tensor:
    """Value of ``hard``, gradient of ``soft`` (the straight-through estimator).

    >>> import chainrule as cr
    >>> x = cr.tensor([0.3, 1.6], requires_grad=True)
    >>> y = cr.estimators.straight_through(cr.round(x), x); y
    tensor([0., 2.], grad_fn=<_StraightThroughBackward>)
    >>> (y * y).sum().backward(); x.grad
    tensor([0., 4.])
    """
    if np.shape(raw(hard)) != np.shape(raw(soft)):
        raise ShapeError(f"straight_through: hard has shape {np.shape(raw(hard))} but soft has "
                         f"shape {np.shape(raw(soft))}; they must match (broadcast hard first)")
    return _StraightThrough.apply(hard, soft)


def round_ste(x: Any) -> Tensor:
    """``round(x)`` forward, identity gradient (the straight-through rounding estimator).

    >>> import chainrule as cr
    >>> x = cr.tensor([0.4, 2.7], requires_grad=True)
    >>> cr.estimators.round_ste(x).sum().backward(); x.grad
    tensor([1., 1.])
    """
    return straight_through(ops.round(x), x)


def gumbel_softmax(logits: Any, tau: float = 1.0, hard: bool = True, axis: int = -1,
                   generator: Any = None) -> Tensor:
    """Sample from Categorical(logits) relaxed: softmax((logits + Gumbel noise) / tau).

    With ``hard=True`` the value is the one-hot of the sample and the gradient is the soft
    sample's (straight-through), as ``torch.nn.functional.gumbel_softmax``.

    >>> import chainrule as cr, numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = cr.estimators.gumbel_softmax(cr.tensor([1.0, 2.0, 0.5]), generator=rng)
    >>> y.data.sum(), set(y.data.tolist()) <= {0.0, 1.0}
    (np.float32(1.0), True)
    """
    logits = logits if isinstance(logits, Tensor) else as_tensor(logits)
    if tau <= 0:
        raise ValueError(f"gumbel_softmax: tau must be > 0, got {tau}")
    tiny = np.finfo(np.float64).tiny
    u = np.clip(get_generator(generator).random(logits.shape), tiny, 1.0 - 1e-16)
    gumbels = (-np.log(-np.log(u))).astype(logits.dtype)
    soft = ops.softmax((logits + gumbels) / tau, axis=axis)
    if not hard:
        return soft
    idx = np.argmax(soft.data, axis=axis)
    one_hot = np.zeros(soft.shape, dtype=soft.dtype)
    np.put_along_axis(one_hot, np.expand_dims(idx, axis), 1, axis=axis)
    return straight_through(one_hot, soft)


def score_function(log_prob: Any, f_value: Any, baseline: Any = None) -> Tensor:
    """Surrogate ``log_prob * (f - baseline)`` (f and baseline held constant): its gradient is the
    REINFORCE / score-function estimate of ∇ E[f]. Elementwise per sample; take ``.mean()``.

    ``baseline``: None, a number/array, or ``"mean"`` (leave-one-out mean over axis 0: unbiased).

    >>> import chainrule as cr
    >>> theta = cr.tensor(0.5, requires_grad=True)
    >>> d = cr.distributions.Bernoulli(probs=theta)
    >>> z = cr.tensor([1.0, 0.0])
    >>> cr.estimators.score_function(d.log_prob(z), z * 3.0).mean().backward(); theta.grad
    tensor(3.)
    """
    f = np.asarray(raw(f_value), dtype=np.float64)
    if isinstance(baseline, str):
        if baseline != "mean":
            raise ValueError(f"score_function: unknown baseline {baseline!r}; use None, a value or "
                             f"'mean' (leave-one-out)")
        n = f.shape[0] if f.ndim else 1
        if n < 2:
            raise ValueError("score_function: baseline='mean' needs at least 2 samples on axis 0")
        b = (f.sum(axis=0, keepdims=True) - f) / (n - 1)
    else:
        b = 0.0 if baseline is None else np.asarray(raw(baseline), dtype=np.float64)
    weight = (f - b).astype(np.asarray(raw(log_prob)).dtype)
    return log_prob * weight


def _per_sample(x: Any, n: int) -> Tensor:
    """Sum over all axes but the first (the sample axis)."""
    return ops.reshape(x, (n, -1)).sum(axis=1) if x.ndim != 1 else x


def reparam_estimator(make_dist: Callable[[Tensor], Any], f: Callable[[Tensor], Any]) -> Callable:
    """Estimator for ``report``: f(rsample) with a reparameterized sample (pathwise gradient).

    >>> import chainrule as cr, numpy as np
    >>> est = cr.estimators.reparam_estimator(lambda m: cr.distributions.Normal(m, 1.0), lambda z: z)
    >>> est(cr.tensor(np.zeros(4), requires_grad=True), np.random.default_rng(0)).shape
    (4,)
    """
    def estimate(theta: Tensor, generator: Any) -> Tensor:
        z = make_dist(theta).rsample(generator=generator)
        return _per_sample(f(z), theta.shape[0])
    return estimate


def reinforce_estimator(make_dist: Callable[[Tensor], Any], f: Callable[[Any], Any],
                        baseline: Any = None) -> Callable:
    """Estimator for ``report``: the score-function surrogate of f at a (detached) sample.

    >>> import chainrule as cr, numpy as np
    >>> bern = lambda p: cr.distributions.Bernoulli(probs=p)
    >>> est = cr.estimators.reinforce_estimator(bern, lambda z: z, baseline="mean")
    >>> est(cr.tensor(np.full(4, 0.5), requires_grad=True), np.random.default_rng(0)).shape
    (4,)
    """
    def estimate(theta: Tensor, generator: Any) -> Tensor:
        dist = make_dist(theta)
        z = dist.sample(generator=generator)
        n = theta.shape[0]
        return score_function(_per_sample(dist.log_prob(z), n), _per_sample(f(z), n), baseline)
    return estimate


@dataclass
class EstimatorStats:
    """Bias and spread of one estimator over ``n`` samples (gradients flattened)."""

    name: str
    mean: np.ndarray
    stderr: np.ndarray
    variance: np.ndarray
    bias: np.ndarray
    n: int

    @property
    def z_score(self) -> float:
        """Largest |bias| / standard error: below ~3 means consistent with unbiased."""
        return float(np.max(np.abs(self.bias) / np.maximum(self.stderr, 1e-300)))


class Report(dict):
    """``{name: EstimatorStats}`` that prints as a table; ``ratio(a, b)`` compares variances."""

    def __init__(self, stats: list, exact: np.ndarray) -> None:
        super().__init__((s.name, s) for s in stats)
        self.exact = exact

    def ratio(self, a: str, b: str) -> float:
        """Total variance of estimator ``a`` divided by that of ``b``."""
        return float(np.sum(self[a].variance) / np.sum(self[b].variance))

    def __str__(self) -> str:
        lines = [f"exact gradient: {_fmt(self.exact)}",
                 f"{'estimator':<26}{'mean':>12}{'std. error':>12}{'variance':>12}"
                 f"{'|bias|/SE':>11}"]
        for s in self.values():
            lines.append(f"{s.name:<26}{_fmt(s.mean):>12}{_fmt(s.stderr):>12}{_fmt(s.variance):>12}"
                         f"{s.z_score:>11.2f}")
        return "\n".join(lines)


def _fmt(a: np.ndarray) -> str:
    return " ".join(f"{v:.4g}" for v in np.ravel(a))


def report(estimators: Mapping[str, Callable], theta: Any, exact: Any, num_samples: int = 1000,
           generator: Any = None) -> Report:
    """Bias and variance of gradient estimators of ∇θ E[f] over ``num_samples`` samples.

    Each estimator is ``est(thetas, generator) -> surrogate`` where ``thetas`` holds one copy of
    θ per sample (shape (K, *θ.shape)) and ``surrogate`` has shape (K,): sample i's gradient is
    d surrogate[i] / d thetas[i] (one backward pass for all K). ``exact`` is the exact gradient,
    or a function θ -> E[f] (e.g. the enumerated sum for a discrete problem) that is differentiated.

    >>> import chainrule as cr, numpy as np
    >>> f = lambda z: z * z                          # E[z^2] = mu^2 + 1, gradient 2 mu
    >>> normal = lambda m: cr.distributions.Normal(m, 1.0)
    >>> est = {"reparam": cr.estimators.reparam_estimator(normal, f)}
    >>> r = cr.estimators.report(est, 1.5, exact=3.0, generator=np.random.default_rng(0))
    >>> r["reparam"].z_score < 3
    True
    """
    theta0 = np.asarray(raw(theta), dtype=np.float64)
    exact_grad = _exact_gradient(exact, theta0)
    gen = get_generator(generator)
    stats = []
    for name, est in estimators.items():
        thetas = Tensor(np.array(np.broadcast_to(theta0, (num_samples,) + theta0.shape)),
                        requires_grad=True)
        surrogate = est(thetas, gen)
        if tuple(surrogate.shape) != (num_samples,):
            raise ShapeError(f"report: estimator {name!r} returned shape {tuple(surrogate.shape)}; "
                             f"it must return one surrogate per sample, shape ({num_samples},)")
        surrogate.sum().backward()
        per = np.zeros((num_samples, theta0.size)) if thetas.grad is None else \
            np.asarray(thetas.grad.data, np.float64).reshape(num_samples, -1)
        mean, var = per.mean(axis=0), per.var(axis=0, ddof=1)
        stats.append(EstimatorStats(name, mean, np.sqrt(var / num_samples), var,
                                    mean - exact_grad.ravel(), num_samples))
    return Report(stats, exact_grad)


def _exact_gradient(exact: Any, theta0: np.ndarray) -> np.ndarray:
    if not callable(exact):
        return np.asarray(raw(exact), dtype=np.float64).reshape(theta0.shape)
    t = Tensor(theta0.copy(), requires_grad=True)
    exact(t).backward()
    return np.asarray(t.grad.data, dtype=np.float64)
