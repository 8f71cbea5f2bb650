"""The shared step of RMSprop, Adagrad, Adamax, NAdam and RAdam, as ``torch.optim`` orders it.

Each step: complex parameters become pairs of reals; ``maximize`` flips the gradient; weight decay is
added to the gradient (L2) or, with ``decoupled_weight_decay``, shrinks the parameter; ``state["step"]``
counts; then the subclass's ``rule(p, g, state, group, step)`` updates ``p`` in place.
"""
from __future__ import annotations

from typing import Any, Iterable

from chainrule.core._backend import np
from chainrule.optim.optimizer import Optimizer


def _update_moments(m: Any, v: Any, g: Any, b1: float, b2: float) -> None:
    """Adam's running moments, in place: ``m`` the mean of ``g`` (decay ``b1``), ``v`` of ``g**2`` (``b2``)."""
    m += (1 - b1) * (g - m)
    v *= b2
    v += (1 - b2) * g * g


class AdaptiveOptimizer(Optimizer):
    """Base for the per-coordinate adaptive optimizers; subclasses define ``init_state`` and ``rule``."""

    def __init__(self, params: Iterable[Any], defaults: dict) -> None:
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay", "alpha", "momentum", "lr_decay",
                    "initial_accumulator_value", "momentum_decay"):
            if key in defaults and not defaults[key] >= 0:
                raise ValueError(f"{name}: {key} must be >= 0, got {key}={defaults[key]}")
        if "betas" in defaults:
            betas = defaults["betas"] = tuple(defaults["betas"])
            if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
                raise ValueError(f"{name}: betas must be two numbers in [0, 1), got betas={betas}")
        if "alpha" in defaults and defaults["alpha"] > 1:
            raise ValueError(f"{name}: alpha must be in [0, 1], got alpha={defaults['alpha']}")
        super().__init__(params, defaults)

    def init_state(self, p: Any, group: dict) -> dict:
        raise TypeError(f"{type(self).__name__} does not define init_state(p, group)")

    def rule(self, p: Any, g: Any, state: dict, group: dict, step: int) -> None:
        raise TypeError(f"{type(self).__name__} does not define rule(p, g, state, group, step)")

    def update(self, p: Any, g: Any, state: dict, group: dict) -> None:
        if p.dtype.kind == "c":       # as PyTorch: the real and imaginary parts are two real parameters
            return self.update(p.view(p.real.dtype), np.ascontiguousarray(g).view(p.real.dtype), state, group)
        if group["maximize"]:
            g = -g
        wd = group["weight_decay"]
        if wd and group.get("decoupled_weight_decay"):
            p *= 1 - group["lr"] * wd
        elif wd:
            g = g + wd * p
        if not state:
            state.update(step=0, **self.init_state(p, group))
        state["step"] += 1
        self.rule(p, g, state, group, state["step"])
