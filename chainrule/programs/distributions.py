"""Probability distributions: ``log_prob``, ``sample`` and (Normal) reparameterized ``rsample``.

Follows ``torch.distributions``: ``sample`` is not differentiable (use a score-function estimator,
see ``chainrule.estimators``); ``Normal.rsample`` is loc + scale * eps, differentiable in loc and
scale (the reparameterization trick). Random numbers come from ``generator`` or chainrule's
default generator (``chainrule.random``).
"""
from __future__ import annotations

from typing import Any

from chainrule import numpy as ops
from chainrule.core import _dtypes
from chainrule.core._backend import np
from chainrule.core.random import get_generator
from chainrule.core.tensor import Tensor, wrap
from chainrule.numpy import as_tensor
from chainrule.scipy import stats

__all__ = ["Bernoulli", "Categorical", "Normal"]


def _shape(sample_shape: Any, batch_shape: tuple) -> tuple:
    if isinstance(sample_shape, int):
        sample_shape = (sample_shape,)
    return tuple(sample_shape) + tuple(batch_shape)


def _param(x: Any) -> Tensor:
    """A parameter as a floating Tensor: integers and bools take the default float dtype (as in
    ``torch.distributions``), so ``Normal(0, 1)`` samples floats rather than rounding to ints."""
    t = x if isinstance(x, Tensor) else as_tensor(x)
    if not _dtypes.is_floating(t.dtype):
        t = wrap(np.asarray(t.data, dtype=_dtypes.get_default_dtype()))
    return t


def _probs_and_logits(probs: Any, logits: Any, who: str, normalize: Any,
                      upper: float = 1.0) -> tuple[Tensor, Tensor]:
    if (probs is None) == (logits is None):
        raise ValueError(f"{who}: pass exactly one of probs= or logits=")
    if probs is not None:
        probs = _param(probs)
        p = np.asarray(probs.data)
        if p.size and (p.min() < 0 or p.max() > upper):
            raise ValueError(f"{who}: probs must lie in [0, {upper}], got values in "
                             f"[{p.min():.3g}, {p.max():.3g}]; pass logits= for raw scores")
        return probs, normalize(probs, None)
    logits = _param(logits)
    return normalize(None, logits), logits


class Normal:
    """Gaussian N(loc, scale²).

    >>> import chainrule as cr
    >>> d = cr.distributions.Normal(cr.tensor(0.0), cr.tensor(1.0))
    >>> round(d.log_prob(cr.tensor(0.0)).item(), 4)
    -0.9189
    """

    def __init__(self, loc: Any, scale: Any) -> None:
        self.loc, self.scale = _param(loc), _param(scale)
        if np.any(np.asarray(self.scale.data) <= 0):
            raise ValueError(f"Normal: scale must be > 0 everywhere, got min "
                             f"{np.min(self.scale.data):.3g}")
        self.batch_shape = np.broadcast_shapes(self.loc.shape, self.scale.shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    def rsample(self, sample_shape: Any = (), generator: Any = None) -> Tensor:
        """loc + scale * eps with eps ~ N(0, 1): differentiable in loc and scale."""
        shape = _shape(sample_shape, self.batch_shape)
        eps = get_generator(generator).standard_normal(shape).astype(self.loc.dtype)
        return self.loc + self.scale * eps

    def sample(self, sample_shape: Any = (), generator: Any = None) -> Tensor:
        """A sample with no gradient (as ``torch.distributions``)."""
        return self.rsample(sample_shape, generator).detach()

    def log_prob(self, value: Any) -> Tensor:
        return stats.norm.logpdf(value, self.loc, self.scale)

    def entropy(self) -> Tensor:
        return stats.norm.entropy(scale=self.scale) + ops.zeros_like(self.loc)


class Bernoulli:
    """Bernoulli(p) on {0, 1}, from ``probs`` or ``logits``.

    >>> import chainrule as cr
    >>> d = cr.distributions.Bernoulli(probs=cr.tensor(0.25))
    >>> round(d.log_prob(cr.tensor(1.0)).exp().item(), 4)
    0.25
    """

    def __init__(self, probs: Any = None, logits: Any = None) -> None:
        self.probs, self.logits = _probs_and_logits(probs, logits, "Bernoulli", _bernoulli_pair)
        self.batch_shape = self.probs.shape

    def sample(self, sample_shape: Any = (), generator: Any = None) -> Tensor:
        """0/1 values in the probs' dtype; no gradient."""
        shape = _shape(sample_shape, self.batch_shape)
        u = get_generator(generator).random(shape)
        return wrap((u < np.asarray(self.probs.data)).astype(self.probs.dtype))

    def log_prob(self, value: Any) -> Tensor:
        # x * logit - softplus(logit): stable for any logit (cr.stats.bernoulli takes p, not logits)
        return value * self.logits - ops.softplus(self.logits)

    def entropy(self) -> Tensor:
        return ops.softplus(self.logits) - self.probs * self.logits


def _bernoulli_pair(probs: Any, logits: Any) -> Tensor:
    if probs is None:
        return ops.sigmoid(logits)
    eps = float(np.finfo(probs.dtype).eps)       # torch's clamp_probs: finite logits at p = 0 and 1
    p = ops.clip(probs, eps, 1.0 - eps)
    return ops.log(p) - ops.log1p(-p)


class Categorical:
    """Categorical over the last axis, from ``probs`` (normalised for you) or ``logits``.

    >>> import chainrule as cr
    >>> d = cr.distributions.Categorical(probs=cr.tensor([0.2, 0.8]))
    >>> round(d.log_prob(1).exp().item(), 4)
    0.8
    """

    def __init__(self, probs: Any = None, logits: Any = None) -> None:
        self.probs, self.logits = _probs_and_logits(probs, logits, "Categorical", _categorical_pair,
                                                    upper=np.inf)
        self.logits = ops.log_softmax(self.logits, axis=-1)
        self.probs = ops.exp(self.logits)
        self.batch_shape = self.logits.shape[:-1]
        self.num_categories = self.logits.shape[-1]

    def sample(self, sample_shape: Any = (), generator: Any = None) -> np.ndarray:
        """Integer category indices (inverse-CDF sampling); no gradient."""
        shape = _shape(sample_shape, self.batch_shape)
        cdf = np.cumsum(np.asarray(self.probs.data, dtype=np.float64), axis=-1)
        u = get_generator(generator).random(shape + (1,)) * cdf[..., -1:]
        return np.minimum((u >= cdf).sum(axis=-1), self.num_categories - 1)

    def log_prob(self, value: Any) -> Tensor:
        idx = np.asarray(value.data if isinstance(value, Tensor) else value).astype(np.int64)
        logits = ops.broadcast_to(self.logits, idx.shape + (self.num_categories,))
        return ops.take_along_axis(logits, idx[..., None], axis=-1)[..., 0]

    def entropy(self) -> Tensor:
        return -ops.sum(self.probs * self.logits, axis=-1)


def _categorical_pair(probs: Any, logits: Any) -> Tensor:
    if probs is None:
        return ops.softmax(logits, axis=-1)
    eps = np.finfo(probs.dtype).tiny
    return ops.log(probs + eps)
