"""True forward mode: tangents travel with primals through each primitive's JVP rule.

Nothing is saved for a backward pass. Each ``dual_level`` gets a fresh id; a tensor carries at most
one tangent per level in ``_tangents``. While the tangent of level L is computed, levels >= L are
hidden, so a tangent of level L carries only tangents of outer levels (a tower of dual numbers):
nested derivatives never mix (no perturbation confusion).
"""
from __future__ import annotations

import itertools
from typing import Any

from chainrule import numpy as _ops
from chainrule.core._backend import ndarray
from chainrule.core._dtypes import is_floating
from chainrule.core.errors import DTypeError, ShapeError, rule_error
from chainrule.core.grad_mode import STATE, add_to, remove_from, state_scope
from chainrule.core.tensor import Tensor, wrap

__all__ = ["UnpackedDual", "dual_level", "make_dual", "unpack_dual"]

_level_ids = itertools.count(1)


def push_tangents(prim: Any, xs: tuple, params: dict, out: Any) -> None:
    """Give ``out`` a tangent at every visible level that some input carries one at.

    The common case, one level and nothing to record, runs the JVP rules on the ndarrays
    themselves (no nested tangents, no graph), so a jvp, and the backward of forward-over-reverse,
    cost little more than their arithmetic. Otherwise the rules run on Tensors (``_push_nested``).
    """
    st = STATE
    levels = st.fw_levels
    if len(levels) != 1 or st.recorder is not None:     # (cr.compile: the rules through ops, taped)
        return _push_nested(prim, xs, params, out, st)
    level = levels[0]
    if level > st.fw_visible:
        return None                     # the level is hidden here: there is nothing to push
    record = st.grad_enabled
    datas, todo = [], []
    for i, x in enumerate(xs):
        if isinstance(x, Tensor):
            if record and x._requires_grad:
                return _push_nested(prim, xs, params, out, st)
            datas.append(x.data)
            t = x._tangents.get(level) if x._tangents else None
            if t is not None:
                if record and t._requires_grad:
                    return _push_nested(prim, xs, params, out, st)
                todo.append((i, t if t._level else t.data))     # (a tangent batched by vmap stays one)
        else:
            datas.append(x)
    o = out.data
    if todo and o.dtype.kind == "c" and prim.complex is None:
        raise _ops.complex_error(prim, o.dtype, "forward-mode derivative")
    tout = _tangent_sum(prim, todo, o, datas, params)
    if tout is not None:
        if out._tangents is None:
            out._tangents = {}
        out._tangents[level] = fit_tangent(tout, out, prim.name)
    return None


def levels_of(xs: Any) -> list:
    """The active, visible levels at which some tensor among ``xs`` carries a tangent, in order."""
    st = STATE
    active, visible = st.fw_levels, st.fw_visible
    return sorted({level for x in xs if isinstance(x, Tensor) and x._tangents
                   for level in x._tangents if level <= visible and level in active})


def tower(level: int) -> state_scope:
    """Scope in which the levels >= ``level`` are hidden, while level ``level``'s tangents are
    computed (tower semantics: a tangent of level L carries only tangents of outer levels)."""
    return state_scope(fw_visible=level - 1)


def _push_nested(prim: Any, xs: tuple, params: dict, out: Any, st: Any) -> None:
    """Several levels, or tangents that must be recorded: the rules run on Tensors, level by level."""
    levels = levels_of(xs)
    if not levels:
        return
    if out.data.dtype.kind == "c" and prim.complex is None:
        raise _ops.complex_error(prim, out.data.dtype, "forward-mode derivative")
    if out._tangents is None:
        out._tangents = {}
    for level in levels:
        with tower(level):
            todo = [(i, t) for i, x in enumerate(xs)
                    if isinstance(x, Tensor) and x._tangents and (t := x._tangents.get(level)) is not None]
            tout = _tangent_sum(prim, todo, out, xs, params)
            if tout is not None:
                out._tangents[level] = fit_tangent(tout, out, prim.name)


def _tangent_sum(prim: Any, todo: list, out: Any, args: Any, params: dict) -> Any:
    """The sum of the JVP rules' terms for the ``(input index, tangent)`` pairs in ``todo``; None
    when no rule applies."""
    rules, variadic, tout = prim.jvps, prim.variadic, None
    for i, t in todo:
        rule = rules[0 if variadic else i]
        if rule is None:
            continue
        try:
            ti = rule(t, out, *args, argnum=i, **params) if variadic else rule(t, out, *args, **params)
        except Exception as e:
            raise _rule_error(e, prim) from e
        tout = ti if tout is None else tout + ti
    return tout


def _rule_error(e: Exception, prim: Any) -> Exception:
    """``e``, raised inside ``prim``'s JVP rule, as the error that names it."""
    return rule_error(e, f"forward-mode derivative of '{prim.name}'")


def fit_tangent(t: Any, out: Any, who: str) -> Any:
    """Broadcast a tangent to its primal's shape and cast it to its dtype (the only place)."""
    if type(t) is ndarray and t.shape == out.data.shape and t.dtype is out.data.dtype:
        return wrap(t)                  # the common case, exactly
    if not isinstance(t, Tensor):
        t = wrap(t)
    if t.shape != out.shape:
        try:
            t = _ops.broadcast_to(t, out.shape)
        except ValueError:
            raise ShapeError(f"{who}: tangent of shape {t.shape} does not fit the output's shape "
                             f"{out.shape}") from None
    if t.dtype != out.dtype:
        t = _ops.astype(t, out.dtype)
    return t


class dual_level:
    """Context manager that opens a forward-mode level (PyTorch's ``forward_ad.dual_level``).

    >>> import chainrule as cr
    >>> from chainrule import forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(cr.tensor(2.0), cr.tensor(1.0))
    ...     fwAD.unpack_dual(x * x).tangent
    tensor(4.)
    """

    def __enter__(self) -> int:
        self.level = next(_level_ids)
        STATE.fw_push = push_tangents        # apply reaches forward mode through the thread state
        add_to("fw_levels", self.level)
        return self.level

    def __exit__(self, *exc: object) -> None:
        remove_from("fw_levels", self.level)


def _current_level(level: int | None) -> int:
    if level is not None:
        return level
    if not STATE.fw_levels:
        raise RuntimeError("forward_ad: no dual level is active; use `with forward_ad.dual_level():`")
    return STATE.fw_levels[-1]


def make_dual(primal: Any, tangent: Any, level: int | None = None) -> Any:
    """Return a view of ``primal`` that carries ``tangent`` at the current level.

    >>> import chainrule as cr
    >>> from chainrule import forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     fwAD.unpack_dual(cr.sin(fwAD.make_dual(cr.tensor(0.0), cr.tensor(2.0)))).tangent
    tensor(2.)
    """
    level = _current_level(level)
    if not isinstance(primal, Tensor):
        primal = Tensor(primal)
    if not isinstance(tangent, Tensor):
        tangent = Tensor(tangent)
    if tangent.shape != primal.shape:
        raise ShapeError(f"make_dual: tangent shape {tangent.shape} does not match primal shape "
                         f"{primal.shape}")
    if not is_floating(primal.dtype):
        raise DTypeError(f"make_dual: the primal has dtype {primal.dtype} (shape {primal.shape}); only "
                         f"floating tensors carry tangents. Cast it first, e.g. .astype(cr.float64)")
    if tangent.dtype != primal.dtype:
        raise DTypeError(f"make_dual: tangent dtype {tangent.dtype} does not match primal dtype "
                         f"{primal.dtype}; cast it with .astype({primal.dtype})")
    dual = _ops.alias(primal)
    if not isinstance(dual, Tensor):
        dual = wrap(dual)
    tangents = dict(dual._tangents or {})
    tangents[level] = tangent
    dual._tangents = tangents
    return dual


class UnpackedDual(tuple):
    """(primal, tangent) with named fields, as returned by ``unpack_dual``."""

    @property
    def primal(self) -> Any:
        return self[0]

    @property
    def tangent(self) -> Any:
        return self[1]


def unpack_dual(tensor: Any, level: int | None = None) -> UnpackedDual:
    """Split a dual tensor into (primal, tangent) at the current level; tangent None if it has none.

    >>> import chainrule as cr
    >>> from chainrule import forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     fwAD.unpack_dual(cr.tensor(1.0)).tangent is None
    True
    """
    level = _current_level(level)
    if not isinstance(tensor, Tensor) or not tensor._tangents or level not in tensor._tangents:
        return UnpackedDual((tensor, None))
    tangent = tensor._tangents[level]
    primal = _ops.alias(tensor)
    rest = {k: v for k, v in tensor._tangents.items() if k != level}
    primal._tangents = rest or None
    return UnpackedDual((primal, tangent))
