"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay."""
from __future__ import annotations

from typing import Any, Iterable

from chainrule.core._backend import np
from chainrule.optim.optimizer import Optimizer


class SGD(Optimizer):
    """SGD; follows ``torch.optim.SGD`` (momentum buffer starts at the first gradient).

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0]); opt = cr.optim.SGD([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    Parameter(tensor([0.8], requires_grad=True))
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr, momentum and weight_decay must be >= 0, got lr={lr}, "
                             f"momentum={momentum}, weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov=True needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def update(self, p: Any, g: Any, state: dict, group: dict) -> None:
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        mu = group["momentum"]
        if mu:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = np.array(g, copy=True)
            else:
                buf *= mu
                buf += (1 - group["dampening"]) * g
            g = g + mu * buf if group["nesterov"] else buf
        p -= (group["lr"] * g).astype(p.dtype, copy=False)
