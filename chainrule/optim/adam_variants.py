"""Adamax and NAdam (Kingma & Ba, arXiv 1412.6980 §7; Dozat, ICLR 2016 workshop) and RAdam (Liu et al.,
arXiv 1908.03265), as ``torch.optim.Adamax``, ``NAdam`` and ``RAdam``."""
from __future__ import annotations

import math
from typing import Any, Iterable

from chainrule.core._backend import np
from chainrule.optim._adaptive import AdaptiveOptimizer, _update_moments


class Adamax(AdaptiveOptimizer):
    """Adam with the infinity norm: the second moment is a decaying running maximum of ``|g| + eps``.

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0]); opt = cr.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); round(w.item(), 6)    # the first step moves by lr
    0.9
    """

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, *, maximize: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def init_state(self, p: Any, group: dict) -> dict:
        return {"exp_avg": np.zeros_like(p), "exp_inf": np.zeros_like(p)}

    def rule(self, p: Any, g: Any, state: dict, group: dict, step: int) -> None:
        (b1, b2), m, u = group["betas"], state["exp_avg"], state["exp_inf"]
        m += (1 - b1) * (g - m)
        u *= b2
        np.maximum(u, np.abs(g) + group["eps"], out=u)
        p -= (group["lr"] / (1 - b1 ** step) * m / u).astype(p.dtype, copy=False)


class NAdam(AdaptiveOptimizer):
    """Adam with Nesterov momentum and Dozat's momentum schedule ``b1 (1 - 0.96^(t momentum_decay) / 2)``.

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0]); opt = cr.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); round(w.item(), 4)
    0.8944
    """

    def __init__(self, params: Iterable[Any], lr: float = 2e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def init_state(self, p: Any, group: dict) -> dict:
        return {"mu_product": 1.0, "exp_avg": np.zeros_like(p), "exp_avg_sq": np.zeros_like(p)}

    def rule(self, p: Any, g: Any, state: dict, group: dict, step: int) -> None:
        (b1, b2), lr, md = group["betas"], group["lr"], group["momentum_decay"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        mu = b1 * (1.0 - 0.5 * 0.96 ** (step * md))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * md))
        state["mu_product"] *= mu
        mu_prod = state["mu_product"]
        _update_moments(m, v, g, b1, b2)
        denom = np.sqrt(v / (1 - b2 ** step)) + group["eps"]
        p -= ((lr * (1.0 - mu) / (1.0 - mu_prod)) * g / denom).astype(p.dtype, copy=False)
        p -= ((lr * mu_next / (1.0 - mu_prod * mu_next)) * m / denom).astype(p.dtype, copy=False)


class RAdam(AdaptiveOptimizer):
    """Rectified Adam: plain momentum SGD while the variance estimate is unreliable (``rho_t <= 5``).

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0]); opt = cr.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); round(w.item(), 6)    # step 1: lr times the gradient
    0.8
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))

    def init_state(self, p: Any, group: dict) -> dict:
        return {"exp_avg": np.zeros_like(p), "exp_avg_sq": np.zeros_like(p)}

    def rule(self, p: Any, g: Any, state: dict, group: dict, step: int) -> None:
        (b1, b2), lr = group["betas"], group["lr"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        _update_moments(m, v, g, b1, b2)
        bc2 = 1 - b2 ** step
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * b2 ** step / bc2
        upd = m / (1 - b1 ** step) * lr
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            upd = upd * (math.sqrt(bc2) / (np.sqrt(v) + group["eps"])) * rect
        p -= upd.astype(p.dtype, copy=False)
