"""Learning-rate schedules: call ``scheduler.step()`` once per epoch, after ``optimizer.step()``.

``StepLR`` and ``CosineAnnealingLR`` are closed forms of the epoch. The others use PyTorch's
machinery: the constructor takes an initial step (``last_epoch`` becomes 0), most rules are
*chainable* (they scale the group's current "lr", so ``ChainedScheduler`` composes them), and
``_get_closed_form_lr`` gives the value at an epoch where PyTorch has one (``SequentialLR`` uses it
at its milestones). Their ``state_dict`` is the attributes without the optimizer; plain functions
(``lr_lambda``, ``scale_fn``) are not saved, callable objects save their ``__dict__``, as in PyTorch.
"""
from __future__ import annotations

import copy
import math
import types
from bisect import bisect_right
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from chainrule.optim.optimizer import Optimizer

__all__ = ["ChainableLR", "ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
           "CyclicLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR",
           "OneCycleLR", "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR"]


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


def _per_group(cls: str, name: str, optimizer: Optimizer, value: Any) -> list:
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{cls}: {name} has {len(value)} values, the optimizer has {n} parameter "
                             f"groups; pass one value or one per group")
        return list(value)
    return [value] * n


class ChainableLR(LRScheduler):
    """Base of the schedules here: PyTorch's ``LRScheduler`` (initial step, ``get_lr``, ``_last_lr``).

    A subclass defines ``get_lr()`` from ``self.last_epoch``, ``self.base_lrs`` or the groups' current "lr":

    >>> import chainrule as cr
    >>> from chainrule.optim.lr_scheduler import ChainableLR
    >>> class Halving(ChainableLR):
    ...     def get_lr(self):
    ...         return [b / 2 ** self.last_epoch for b in self.base_lrs]
    >>> s = Halving(cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)); s.step(); s.get_last_lr()
    [0.5]
    """

    _callables: tuple = ()     # attributes holding a callable or a list of callables

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: {type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        for i, g in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                g.setdefault("initial_lr", g["lr"])
            elif "initial_lr" not in g:
                raise KeyError(f"{type(self).__name__}: param_groups[{i}] has no 'initial_lr' although "
                               f"last_epoch={last_epoch}; load the optimizer's state_dict before resuming")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        raise TypeError(f"{type(self).__name__} does not define get_lr()")

    def step(self) -> None:
        """Advance one step (an epoch, or a batch for ``OneCycleLR`` and ``CyclicLR``)."""
        self._step_count += 1
        self._update_lr()

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, values):
            g["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """The learning rates the last step set, one per parameter group."""
        return list(self._last_lr)

    def _group_lrs(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """The attributes but the optimizer (functions become None, callable objects their ``__dict__``)."""
        out = {k: copy.deepcopy(v) for k, v in self.__dict__.items()
               if k != "optimizer" and k not in self._callables}
        for k in self._callables:
            v = self.__dict__.get(k)
            out[k] = [_fn_state(f) for f in v] if isinstance(v, list) else _fn_state(v)
        return out

    def load_state_dict(self, state: dict) -> None:
        """Restore the attributes; the optimizer's own state dict restores its learning rates."""
        state = dict(state)
        saved = {k: state.pop(k, None) for k in self._callables}
        self.__dict__.update(copy.deepcopy(state))
        for k, v in saved.items():
            mine = getattr(self, k, None)
            for f, s in zip(mine if isinstance(mine, list) else [mine], v if isinstance(v, list) else [v]):
                if s is not None:
                    f.__dict__.update(s)


def _fn_state(f: Any) -> Any:
    return None if f is None or isinstance(f, (types.FunctionType, types.MethodType)) else dict(f.__dict__)


def _lambdas(cls: str, optimizer: Optimizer, lr_lambda: Any) -> list:
    fns = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * len(optimizer.param_groups)
    if len(fns) != len(optimizer.param_groups):
        raise ValueError(f"{cls}: got {len(fns)} lr_lambdas for {len(optimizer.param_groups)} parameter groups")
    if not all(callable(f) for f in fns):
        raise TypeError(f"{cls}: lr_lambda must be a function of the epoch (or a list of them)")
    return fns


class _LambdaScheduler(ChainableLR):
    """Base of LambdaLR and MultiplicativeLR: one ``lr_lambda`` per parameter group (saved as state)."""

    _callables = ("lr_lambdas",)

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable | list, last_epoch: int = -1) -> None:
        self.lr_lambdas = _lambdas(type(self).__name__, optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)


class LambdaLR(_LambdaScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.LambdaLR(opt, lambda e: 1 / (e + 1))
    >>> [(s.step(), s.get_last_lr()[0])[1] for _ in range(3)]
    [0.5, 0.3333333333333333, 0.25]
    """

    def get_lr(self) -> list[float]:
        return [b * f(self.last_epoch) for f, b in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    """Multiply the current rate by ``lr_lambda(epoch)`` at each step.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.MultiplicativeLR(opt, lambda e: 0.5)
    >>> [(s.step(), s.get_last_lr()[0])[1] for _ in range(3)]
    [0.5, 0.25, 0.125]
    """

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return self._group_lrs()
        return [g["lr"] * f(self.last_epoch) for f, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


class MultiStepLR(ChainableLR):
    """Multiply the rate by ``gamma`` at each milestone epoch (a repeated milestone counts twice).

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.5)
    >>> [(s.step(), s.get_last_lr()[0])[1] for _ in range(4)]
    [0.5, 0.5, 0.25, 0.25]
    """

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._group_lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._group_lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        k = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [b * self.gamma ** k for b in self.base_lrs]


class ExponentialLR(ChainableLR):
    """Multiply the rate by ``gamma`` every epoch.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> [(s.step(), s.get_last_lr()[0])[1] for _ in range(3)]
    [0.5, 0.25, 0.125]
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return self._group_lrs() if self._is_initial else [lr * self.gamma for lr in self._group_lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class ConstantLR(ChainableLR):
    """Scale the rate by ``factor`` until epoch ``total_iters``, then restore it.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> [s.get_last_lr()[0]] + [(s.step(), s.get_last_lr()[0])[1] for _ in range(2)]
    [0.5, 0.5, 1.0]
    """

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got factor={factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._group_lrs()]
        if self.last_epoch != self.total_iters:
            return self._group_lrs()
        return [lr * (1.0 / self.factor) for lr in self._group_lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor)) for b in self.base_lrs]


class LinearLR(ChainableLR):
    """Scale the rate linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> [s.get_last_lr()[0]] + [(s.step(), s.get_last_lr()[0])[1] for _ in range(3)]
    [0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got start_factor={start_factor}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got end_factor={end_factor}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        s, e, n = self.start_factor, self.end_factor, self.total_iters
        if self.last_epoch == 0:
            return [lr * s for lr in self._group_lrs()]
        if self._is_initial or self.last_epoch > n:
            return self._group_lrs()
        return [lr * (1.0 + (e - s) / (n * s + (self.last_epoch - 1) * (e - s))) for lr in self._group_lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        s, e, n = self.start_factor, self.end_factor, self.total_iters
        return [b * (s + (e - s) * min(n, self.last_epoch) / n) for b in self.base_lrs]


class PolynomialLR(ChainableLR):
    """Decay the rate as ``(1 - epoch / total_iters) ** power`` until ``total_iters``, then hold it.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=1.0)
    >>> [(s.step(), s.get_last_lr()[0])[1] for _ in range(5)]
    [0.75, 0.5, 0.25, 0.0, 0.0]
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1) -> None:
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._group_lrs()
        n, t = self.total_iters, self.last_epoch
        return [lr * ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power for lr in self._group_lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for b in self.base_lrs]


class StepLR(ChainableLR):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> [(s.step(), s.get_last_lr()[0])[1] for _ in range(4)]
    [1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class CosineAnnealingLR(ChainableLR):
    """Cosine decay from the base rate to ``eta_min`` over ``T_max`` epochs (SGDR without restarts).

    Past ``T_max`` the rate rises again (a cosine of period ``2 T_max``), as PyTorch's.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
    >>> [(s.step(), round(s.get_last_lr()[0], 3))[1] for _ in range(2)]
    [0.5, 0.0]
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        if T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be >= 1, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, n, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._group_lrs()
        if self._step_count == 1 and t > 0:
            return [lo + (b - lo) * (1 + math.cos(t * math.pi / n)) / 2 for b in self.base_lrs]
        if (t - 1 - n) % (2 * n) == 0:
            return [lr + (b - lo) * (1 - math.cos(math.pi / n)) / 2 for b, lr in zip(self.base_lrs, self._group_lrs())]
        return [(1 + math.cos(math.pi * t / n)) / (1 + math.cos(math.pi * (t - 1) / n)) * (lr - lo) + lo
                for lr in self._group_lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]


class CosineAnnealingWarmRestarts(ChainableLR):
    """SGDR (Loshchilov & Hutter, arXiv 1608.03983): cosine decay restarting after ``T_0``, ``T_0 T_mult``, ...

    ``step(epoch)`` also takes a fractional epoch, as PyTorch's.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> [(s.step(), round(s.get_last_lr()[0], 3))[1] for _ in range(4)]
    [0.5, 1.0, 0.5, 1.0]
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive integer, got T_0={T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be an integer >= 1, got T_mult={T_mult}")
        self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = T_0, T_0, T_mult, eta_min, last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (b - self.eta_min) * c for b in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or jump to ``epoch`` (may be fractional: ``epoch + batch / n_batches``)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur, self.T_i = self.T_cur % self.T_i, self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts.step: epoch must be >= 0, got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        for g, lr in zip(self.optimizer.param_groups, self.get_lr()):
            g["lr"] = lr
        self._last_lr = self._group_lrs()


def _set_momentum(group: dict, value: float, use_beta1: bool) -> None:
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _cycle_momentum(cls: str, optimizer: Optimizer, base_momentum: Any, max_momentum: Any,
                    last_epoch: int) -> tuple:
    """OneCycleLR's and CyclicLR's momentum setup: ``(use_beta1, base_momentums, max_momentums)``; a
    fresh start (``last_epoch=-1``) also sets each group's momentum (or beta1) to its maximum."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(f"{cls}: cycle_momentum=True needs an optimizer with momentum or betas, "
                         f"{type(optimizer).__name__} has neither; pass cycle_momentum=False")
    use_beta1 = "betas" in optimizer.defaults
    base = _per_group(cls, "base_momentum", optimizer, base_momentum)
    top = _per_group(cls, "max_momentum", optimizer, max_momentum)
    if last_epoch == -1:
        for m, b, g in zip(top, base, optimizer.param_groups):
            _set_momentum(g, m, use_beta1)
            g["max_momentum"], g["base_momentum"] = m, b
    return use_beta1, base, top


class OneCycleLR(ChainableLR):
    """Smith's 1cycle policy (arXiv 1708.07120), stepped once per batch; momentum (or beta1) cycles inversely.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0, momentum=0.9)
    >>> s = cr.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=4, pct_start=0.5)
    >>> [round(s.get_last_lr()[0], 4)] + [(s.step(), round(s.get_last_lr()[0], 4))[1] for _ in range(3)]
    [0.04, 1.0, 0.5, 0.0]
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True, base_momentum: float | list = 0.85,
                 max_momentum: float | list = 0.95, div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:
        if total_steps is None and (epochs is None or steps_per_epoch is None):
            raise ValueError("OneCycleLR: pass total_steps, or both epochs and steps_per_epoch")
        total = total_steps if total_steps is not None else epochs * steps_per_epoch
        if not isinstance(total, int) or total <= 0:
            raise ValueError(f"OneCycleLR: the number of steps must be a positive integer, got {total}")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got pct_start={pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.total_steps, self._anneal_func_type = total, anneal_strategy
        up = float(pct_start * total) - 1
        if three_phase:
            self._schedule_phases = [
                dict(end_step=up, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * total) - 2, start_lr="max_lr", end_lr="initial_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=total - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=up, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=total - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        max_lrs = _per_group("OneCycleLR", "max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, g in zip(max_lrs, optimizer.param_groups):
                g["initial_lr"], g["max_lr"] = m / div_factor, m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1, _, _ = _cycle_momentum("OneCycleLR", optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        t = self.last_epoch
        if t > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {t} times, but total_steps is {self.total_steps}; "
                             f"make total_steps (or epochs * steps_per_epoch) cover every step")
        lrs = []
        for g in self.optimizer.param_groups:
            start = 0.0
            for i, ph in enumerate(self._schedule_phases):
                if t <= ph["end_step"] or i == len(self._schedule_phases) - 1:
                    pct = (t - start) / (ph["end_step"] - start)
                    lrs.append(self._anneal(g[ph["start_lr"]], g[ph["end_lr"]], pct))
                    if self.cycle_momentum:
                        mom = self._anneal(g[ph["start_momentum"]], g[ph["end_momentum"]], pct)
                        _set_momentum(g, mom, self.use_beta1)
                    break
                start = ph["end_step"]
        return lrs


class CyclicLR(ChainableLR):
    """Cyclical learning rates (Smith, arXiv 1506.01186) between ``base_lr`` and ``max_lr``, per batch.

    ``mode`` is "triangular", "triangular2" (halve the amplitude each cycle) or "exp_range"
    (scale by ``gamma**iteration``); ``scale_fn`` overrides it.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0, momentum=0.9)
    >>> s = cr.optim.lr_scheduler.CyclicLR(opt, base_lr=0.0, max_lr=1.0, step_size_up=2)
    >>> [s.get_last_lr()[0]] + [(s.step(), s.get_last_lr()[0])[1] for _ in range(4)]
    [0.0, 0.5, 1.0, 0.5, 0.0]
    """

    _callables = ("_scale_fn_custom",)

    def __init__(self, optimizer: Optimizer, base_lr: float | list, max_lr: float | list,
                 step_size_up: int = 2000, step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable | None = None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum: float = 0.8, max_momentum: float = 0.9,
                 last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"CyclicLR: {type(optimizer).__name__} is not an Optimizer")
        base_lrs = _per_group("CyclicLR", "base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, g in zip(base_lrs, optimizer.param_groups):
                g["lr"] = lr
        self.max_lrs = _per_group("CyclicLR", "max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' (or pass "
                             f"scale_fn), got {mode!r}")
        self.mode, self.gamma, self._scale_fn_custom = mode, gamma, scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else \
            ("iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1, self.base_momentums, self.max_momentums = _cycle_momentum(
                "CyclicLR", optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        scale = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        s = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [b + (m - b) * scale * s for b, m in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for b, m, g in zip(self.base_momentums, self.max_momentums, self.optimizer.param_groups):
                _set_momentum(g, m - (m - b) * scale * s, self.use_beta1)
        return lrs


class ReduceLROnPlateau(ChainableLR):
    """Multiply the rate by ``factor`` once the metric passed to ``step(metric)`` stops improving.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> s = cr.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> [(s.step(loss), s.get_last_lr()[0])[1] for loss in (3.0, 2.0, 2.0, 2.0, 2.0)]
    [1.0, 1.0, 1.0, 0.5, 0.5]
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: float | list = 0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1, got factor={factor}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"ReduceLROnPlateau: {type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max' and threshold_mode 'rel' or "
                             f"'abs', got mode={mode!r}, threshold_mode={threshold_mode!r}")
        self.factor, self.optimizer = factor, optimizer
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        self.min_lrs = _per_group("ReduceLROnPlateau", "min_lr", optimizer, min_lr)
        self.patience, self.cooldown, self.eps, self.last_epoch = patience, cooldown, eps, 0
        self._last_lr = self._group_lrs()
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if self.threshold_mode == "rel" else best + self.threshold)

    def step(self, metrics: Any) -> None:  # type: ignore[override]
        """Record this epoch's metric (a number or a one-element tensor) and reduce the rate if it plateaued."""
        current = float(metrics)
        self.last_epoch += 1
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            if len(self.min_lrs) != len(self.optimizer.param_groups):
                if self.default_min_lr is None:
                    raise ValueError(f"ReduceLROnPlateau: min_lr has {len(self.min_lrs)} values but the "
                                     f"optimizer now has {len(self.optimizer.param_groups)} groups; set min_lrs")
                self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
            for g, lo in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(float(g["lr"]) * self.factor, lo)
                if float(g["lr"]) - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._group_lrs()


def _check_members(cls: str, optimizer: Optimizer, schedulers: Sequence[Any]) -> None:
    if len(schedulers) < 1:
        raise ValueError(f"{cls}: needs at least one scheduler, got none")
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{cls}: the scheduler at index {i} ({type(s).__name__}) has no optimizer")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{cls}: ReduceLROnPlateau (index {i}) needs a metric in step() and cannot be "
                             f"combined; step it separately")
        if s.optimizer is not optimizer:
            raise ValueError(f"{cls}: the scheduler at index {i} ({type(s).__name__}) belongs to another "
                             f"optimizer; build every scheduler over the same one")


def _nested_state(self: Any) -> dict:
    out = {k: copy.deepcopy(v) for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
    out["_schedulers"] = [s.state_dict() for s in self._schedulers]
    return out


def _load_nested(self: Any, state: dict) -> None:
    state = dict(state)
    subs = state.pop("_schedulers")
    self.__dict__.update(copy.deepcopy(state))
    for s, sd in zip(self._schedulers, subs):
        s.load_state_dict(sd)


class SequentialLR(ChainableLR):
    """Run ``schedulers[i]`` from ``milestones[i-1]`` on (each restarted at its milestone).

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> warm = cr.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> decay = cr.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> s = cr.optim.lr_scheduler.SequentialLR(opt, [warm, decay], milestones=[2])
    >>> [s.get_last_lr()[0]] + [(s.step(), s.get_last_lr()[0])[1] for _ in range(4)]
    [0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, schedulers: list, milestones: list[int],
                 last_epoch: int = -1) -> None:
        _check_members("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} "
                             f"milestones, got {len(milestones)}")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        self.last_epoch, self.optimizer = last_epoch + 1, optimizer
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        self._undo(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step() if hasattr(first, "_initial_step") else first.step()
        self._last_lr = first.get_last_lr()

    def _undo(self, sched: Any) -> None:
        for s in sched._schedulers:
            if hasattr(s, "_schedulers"):
                self._undo(s)
            elif hasattr(s, "last_epoch"):
                s.last_epoch -= 1

    def step(self) -> None:  # type: ignore[override]
        """Advance one epoch, restarting the next scheduler at a milestone."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        s = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            if hasattr(s, "_update_lr"):
                s._update_lr(0)
            else:                          # a closed-form LRScheduler subclass (lr_at)
                s.last_epoch = 0
                s._apply()
        else:
            s.step()
        self._last_lr = s.get_last_lr()

    state_dict, load_state_dict = _nested_state, _load_nested


class ChainedScheduler(ChainableLR):
    """Step several schedulers together, each scaling the rate the previous one set.

    >>> import chainrule as cr
    >>> opt = cr.optim.SGD([cr.nn.Parameter([0.0])], lr=1.0)
    >>> a = cr.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2)
    >>> b = cr.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> s = cr.optim.lr_scheduler.ChainedScheduler([a, b])
    >>> [s.get_last_lr()[0]] + [(s.step(), s.get_last_lr()[0])[1] for _ in range(3)]
    [0.5, 0.25, 0.25, 0.125]
    """

    def __init__(self, schedulers: Sequence[Any], optimizer: Optimizer | None = None) -> None:
        optimizer = optimizer or (schedulers[0].optimizer if schedulers else None)
        _check_members("ChainedScheduler", optimizer, schedulers)
        self._schedulers, self.optimizer = list(schedulers), optimizer
        self._last_lr = self._group_lrs()

    def step(self) -> None:  # type: ignore[override]
        """Step every scheduler, in order."""
        for s in self._schedulers:
            s.step()
        self._last_lr = self._group_lrs()

    state_dict, load_state_dict = _nested_state, _load_nested
