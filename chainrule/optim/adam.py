"""Adam and AdamW: one update rule, two ways of applying weight decay.

Adam (Kingma & Ba, arXiv 1412.6980) adds ``weight_decay * p`` to the gradient; AdamW (Loshchilov &
Hutter, arXiv 1711.05101) shrinks the parameter directly. Both follow ``torch.optim.Adam(W)``.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from chainrule.core._backend import np
from chainrule.optim.optimizer import Optimizer


class Adam(Optimizer):
    """Adam; ``decoupled_weight_decay=True`` makes it AdamW, ``amsgrad=True`` divides by the running
    maximum of the second moment (Reddi et al., ICLR 2018), ``maximize=True`` ascends.

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0]); opt = cr.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); round(w.item(), 6)    # the first step moves by lr
    0.9
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False, decoupled_weight_decay: bool = False) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"{type(self).__name__}: need lr, eps, weight_decay >= 0 and betas in "
                             f"[0, 1), got lr={lr}, eps={eps}, weight_decay={weight_decay}, betas={betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def update(self, p: Any, g: Any, state: dict, group: dict) -> None:
        if p.dtype.kind == "c":       # as PyTorch: the real and imaginary parts are two real parameters
            return self.update(p.view(p.real.dtype), np.ascontiguousarray(g).view(p.real.dtype), state, group)
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        if group["maximize"]:
            g = -g
        if not state:
            state.update(step=0, exp_avg=np.zeros_like(p), exp_avg_sq=np.zeros_like(p))
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = np.zeros_like(p)
        if wd and group["decoupled_weight_decay"]:
            p *= 1 - lr * wd
        elif wd:
            g = g + wd * p
        state["step"] += 1
        m, v, t = state["exp_avg"], state["exp_avg_sq"], state["step"]
        m *= b1
        m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * g * g
        if group["amsgrad"]:
            v = np.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
        denom = np.sqrt(v) / math.sqrt(1 - b2 ** t) + group["eps"]
        p -= (lr / (1 - b1 ** t) * m / denom).astype(p.dtype, copy=False)


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01), as ``torch.optim.AdamW``.

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0]); opt = cr.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * 0).sum().backward(); opt.step(); w    # zero gradient: only the decay acts
    Parameter(tensor([0.95], requires_grad=True))
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)
