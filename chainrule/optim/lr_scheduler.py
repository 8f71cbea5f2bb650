"""Learning-rate schedules: call ``scheduler.step()`` once per epoch, after ``optimizer.step()``."""
from __future__ import annotations

import math
from typing import Any

from chainrule.optim.optimizer import Optimizer


class LRScheduler:
    """Base: sets each group's "lr" to ``lr_at(base_lr, epoch)`` (a closed form, as PyTorch's)."""

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", g["lr"])
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = 0
        self._apply()

    def lr_at(self, base_lr: float, epoch: int) -> float:
        raise TypeError(f"{type(self).__name__} does not define lr_at(base_lr, epoch)")

    def _apply(self) -> None:
        for g, base in zip(self.optimizer.param_groups, self.base_lrs):
            g["lr"] = self.lr_at(base, self.last_epoch)

    def step(self) -> None:
        """Advance one epoch."""
        self.last_epoch += 1
        self._apply()

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict) -> None:
        self.last_epoch = int(state["last_epoch"])
        self.base_lrs = [float(b) for b in state["base_lrs"]]
        self._apply()


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> [(s.step(), s.get_last_lr()[0])[1] for _ in range(4)]
    [1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** (epoch // self.step_size)


class CosineAnnealingLR(LRScheduler):
    """Cosine decay from the base rate to ``eta_min`` over ``T_max`` epochs (SGDR without restarts).

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> [(s.step(), round(s.get_last_lr()[0], 3))[1] for _ in range(2)]
    [0.5, 0.0]
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803
        if T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be >= 1, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer)

    def lr_at(self, base_lr: float, epoch: int) -> Any:
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2
