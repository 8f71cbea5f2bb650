"""The optimizer base: parameter groups, per-parameter state, ``step``, ``zero_grad``, state dicts.

Layout and semantics follow ``torch.optim.Optimizer``: ``param_groups`` is a list of dicts holding
"params" and the hyperparameters; updates run in place on the arrays under ``no_grad``.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Iterable

from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.core.grad_mode import STATE, enable_grad, no_grad
from chainrule.core.tensor import Tensor
from chainrule.nn.module import zero_grads
from chainrule.numpy import raw


class Optimizer:
    """Base class; subclasses define ``update(p, g, state, group)`` on ndarrays (in place)."""

    def __init__(self, params: Iterable[Any], defaults: dict) -> None:
        self.defaults = defaults
        self.param_groups: list[dict] = []
        self.state: dict = {}                 # parameter -> dict of ndarrays / numbers
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list; pass "
                             f"model.parameters() of a model that has parameters")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict) -> None:
        """Add a dict with "params" and optional per-group hyperparameters (others from defaults)."""
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in params:
            if not isinstance(p, Tensor) or not p.requires_grad or not p.is_leaf:
                raise TypeError(f"{type(self).__name__}: can only optimize leaf tensors that require "
                                f"grad, got {type(p).__name__}")
            if id(p) in seen:
                raise ValueError(f"{type(self).__name__}: a parameter appears in more than one group")
        unknown = set(group) - set(self.defaults) - {"params", "initial_lr"}
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown hyperparameters {sorted(unknown)}; known: "
                            f"{sorted(self.defaults)}")
        self.param_groups.append({**self.defaults, **group, "params": params})

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every optimized parameter."""
        zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; ``closure`` (if given) recomputes the loss."""
        if STATE.recorder is not None:      # cr.compile captures a step: it replays this very call
            return STATE.recorder.on_island(self, closure)
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.update(p.data, raw(p.grad), self.state.setdefault(p, {}), group)
                    p._bump()
        return loss

    def update(self, p: Any, g: Any, state: dict, group: dict) -> None:
        raise TypeError(f"{type(self).__name__} does not define update(p, g, state, group)")

    # ----- state dicts: parameters are referred to by their position across groups -----
    def state_dict(self) -> dict:
        """{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]} (copies)."""
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        groups = [{**{k: v for k, v in g.items() if k != "params"},
                   "params": [index[id(p)] for p in g["params"]]} for g in self.param_groups]
        state = {index[id(p)]: copy.deepcopy(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore from ``state_dict()`` output, checking group sizes and state shapes before assigning."""
        groups = state_dict["param_groups"]
        name = type(self).__name__
        if len(groups) != len(self.param_groups) or any(
                len(a["params"]) != len(b["params"]) for a, b in zip(groups, self.param_groups)):
            raise ShapeError(f"{name}.load_state_dict: the saved groups have sizes "
                             f"{[len(g['params']) for g in groups]}, this optimizer has "
                             f"{[len(g['params']) for g in self.param_groups]}; build it over the "
                             f"same parameters in the same order")
        params = [p for g in self.param_groups for p in g["params"]]
        new_state = {}
        for key, s in state_dict["state"].items():
            p = params[int(key)]
            s = {k: (np.array(raw(v), copy=True) if np.ndim(raw(v)) else
                     (raw(v).item() if hasattr(raw(v), "item") else v)) for k, v in s.items()}
            for k, v in s.items():
                if np.ndim(v) and np.shape(v) != p.shape:
                    raise ShapeError(f"{name}.load_state_dict: state {k!r} of parameter {key} has "
                                     f"shape {np.shape(v)}, the parameter has {p.shape}")
            new_state[p] = s
        for mine, saved in zip(self.param_groups, groups):
            for k, v in saved.items():
                if k != "params":
                    mine[k] = raw(v).item() if hasattr(raw(v), "item") else v
        self.state = new_state

    def __repr__(self) -> str:
        hyper = ", ".join(f"{k}={v}" for k, v in self.defaults.items())
        return f"{type(self).__name__}({hyper})"
