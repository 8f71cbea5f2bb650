"""RMSprop (Hinton's lecture 6e; centered form from Graves, arXiv 1308.0850), as ``torch.optim.RMSprop``."""
from __future__ import annotations

from typing import Any, Iterable

from chainrule.core._backend import np
from chainrule.optim._adaptive import AdaptiveOptimizer


class RMSprop(AdaptiveOptimizer):
    """Divide the gradient by a running root-mean-square (``eps`` added outside the square root).

    ``centered=True`` subtracts the squared running mean of the gradient first; ``momentum > 0`` keeps a
    buffer of the scaled steps.

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([1.0]); opt = cr.optim.RMSprop([w], lr=0.01, alpha=0.75)
    >>> (w * w).sum().backward(); opt.step(); round(w.item(), 6)    # 1 - 0.01 * 2 / sqrt(0.25 * 4)
    0.98
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def init_state(self, p: Any, group: dict) -> dict:
        state = {"square_avg": np.zeros_like(p)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = np.zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = np.zeros_like(p)
        return state

    def rule(self, p: Any, g: Any, state: dict, group: dict, step: int) -> None:
        alpha, sq = group["alpha"], state["square_avg"]
        sq *= alpha
        sq += (1 - alpha) * g * g
        if group["centered"]:
            ga = state["grad_avg"]
            ga += (1 - alpha) * (g - ga)
            avg = np.sqrt(sq - ga * ga)
        else:
            avg = np.sqrt(sq)
        avg += group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf *= group["momentum"]
            buf += g / avg
            p -= (group["lr"] * buf).astype(p.dtype, copy=False)
        else:
            p -= (group["lr"] * g / avg).astype(p.dtype, copy=False)
