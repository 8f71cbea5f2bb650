"""Adagrad (Duchi, Hazan & Singer, JMLR 2011), as ``torch.optim.Adagrad``."""
from __future__ import annotations

from typing import Any, Iterable

from chainrule.core._backend import np
from chainrule.optim._adaptive import AdaptiveOptimizer


class Adagrad(AdaptiveOptimizer):
    """Divide each step by the root of the summed squared gradients; ``lr`` decays as ``1/(1+(t-1)lr_decay)``.

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0]); opt = cr.optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); round(w.item(), 6)    # the first step moves by lr
    0.9
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0, eps: float = 1e-10, *,
                 maximize: bool = False) -> None:
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                                      maximize=maximize))

    def init_state(self, p: Any, group: dict) -> dict:
        return {"sum": np.full_like(p, group["initial_accumulator_value"])}

    def rule(self, p: Any, g: Any, state: dict, group: dict, step: int) -> None:
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"] += g * g
        p -= (clr * g / (np.sqrt(state["sum"]) + group["eps"])).astype(p.dtype, copy=False)
