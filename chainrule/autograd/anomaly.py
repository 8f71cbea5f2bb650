"""NaN/inf debugging: ``detect_anomaly`` and the safe-zero-cotangent convention.

Under ``detect_anomaly`` NumPy's floating-point error state is set to ``call`` (divide, invalid,
overflow), so NumPy reports the moment an op *creates* a NaN/inf from finite values (it stays
silent when a NaN is merely passed on). A watcher on ``STATE.observers`` turns each report into
the name of the op that just ran. When a backward rule returns NaN/inf, the error names that
node, the forward call site that created it, and the op that created the first NaN (inside the
rule, or in the forward pass that produced a saved value). Outside anomaly mode the cost is the
engine's ``if STATE.anomaly`` flag check.
"""
from __future__ import annotations

import traceback
from typing import Any

from .._backend import np
from ..errors import GraphError
from ..grad_mode import STATE, refresh_rare


class AnomalyError(GraphError):
    """A backward rule produced NaN or inf under ``detect_anomaly``."""


class _SafeZero:
    on = True


SAFE_ZERO = _SafeZero()


def set_safe_zero_cotangents(flag: bool) -> bool:
    """Keep an exactly-zero cotangent zero through rules with an inf/NaN local derivative.

    On by default: ``where(x > 0, sqrt(x), 0.)`` then has gradient 0 (not NaN) at x <= 0. Pass
    False for PyTorch's/JAX's 0 * inf = NaN. Returns the previous setting.

    >>> import chainrule as cr
    >>> x = cr.tensor([-1.0, 4.0], requires_grad=True)
    >>> cr.where(x > 0, cr.sqrt(x), 0.0).sum().backward(); x.grad
    tensor([0.  , 0.25])
    """
    prev = SAFE_ZERO.on
    SAFE_ZERO.on = bool(flag)
    return prev


class _FPWatch:
    """Observer: remembers which op made NumPy report a floating-point error."""

    def __init__(self) -> None:
        self.flag: str | None = None       # set by NumPy's callback while an op runs
        self.last: str | None = None       # error of the op that ran last (for remember_creation)
        self.in_rule: list = []            # (op, error) created while backward rules ran

    def on_fp_error(self, kind: str, code: int) -> None:
        if self.flag is None:
            self.flag = kind

    def on_op(self, prim: Any, datas: list, params: dict, out: Any) -> None:
        self.last, self.flag = self.flag, None
        if self.last is not None and STATE.in_backward:
            self.in_rule.append((prim.name, self.last))

    def on_save(self, node: Any) -> None:
        pass

    def on_save_function(self, ctx: Any) -> None:
        pass


_WATCHES: list = []


class detect_anomaly:
    """Context manager: record where each op was created and check every backward result.

    >>> import chainrule as cr
    >>> x = cr.tensor([-1.0], requires_grad=True)
    >>> with cr.detect_anomaly():
    ...     try:
    ...         cr.sqrt(x).sum().backward()
    ...     except cr.AnomalyError as e:
    ...         print("SqrtBackward" in str(e), "'sqrt' created nan in forward" in str(e))
    True True
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> detect_anomaly:
        self.prev = STATE.anomaly
        STATE.anomaly = self.check_nan
        refresh_rare()
        self.watch = _FPWatch()
        self.errstate = np.errstate(call=self.watch.on_fp_error, divide="call", invalid="call",
                                    over="call")
        self.errstate.__enter__()
        STATE.observers.append(self.watch)
        refresh_rare()
        _WATCHES.append(self.watch)
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.observers.remove(self.watch)
        refresh_rare()
        _WATCHES.remove(self.watch)
        self.errstate.__exit__(*exc)
        STATE.anomaly = self.prev
        refresh_rare()


def remember_creation(node: Any) -> None:
    """Store the user's call site of the op that created ``node`` (only under detect_anomaly)."""
    stack = traceback.extract_stack()[:-3]
    user = [f for f in stack if "/chainrule/" not in f.filename.replace("\\", "/")] or stack
    if node.extra is None:
        node.extra = {}
    node.extra["trace"] = user
    if _WATCHES and _WATCHES[-1].last is not None:
        node.extra["fp"] = _WATCHES[-1].last


def _site(node: Any) -> str:
    trace = (getattr(node, "extra", None) or {}).get("trace")
    if not trace:
        return "(call site unknown: it was created outside detect_anomaly)"
    f = trace[-1]
    return f"{f.filename}, line {f.lineno}, in {f.name}\n    {f.line}"


def _op_name(node: Any) -> str:
    prim = getattr(node, "prim", None)
    return prim.name if prim is not None else node.name


def _finite(x: Any) -> bool:
    data = np.asarray(x.data if hasattr(x, "_version") else x)
    return data.dtype.kind not in "fc" or bool(np.all(np.isfinite(data)))


def _origin(node: Any, in_rule: list) -> str:
    """Where the first NaN/inf reaching ``node``'s result came from."""
    if in_rule:
        op, kind = in_rule[0]
        return (f"The first NaN/inf was created inside this backward rule by '{op}' ({kind}) from "
                f"finite values.")
    extra = getattr(node, "extra", None) or {}
    if "fp" in extra:
        return (f"The first NaN/inf was created in the forward pass: '{_op_name(node)}' created "
                f"{_kind_word(extra['fp'])} in forward ({extra['fp']}) at {_site(node)}\nand "
                f"this rule used that saved value.")
    for x in getattr(node, "saved", None) or ():
        src = getattr(x, "grad_fn", None)
        if x is not None and src is not None and not _finite(x):
            fp = (getattr(src, "extra", None) or {}).get("fp", "non-finite output")
            return (f"The first NaN/inf was created in the forward pass by '{_op_name(src)}' "
                    f"({fp}) at {_site(src)}")
    return "Its inputs were finite: the rule's local derivative is inf/NaN at this point."


def _hint() -> str:
    if SAFE_ZERO.on:
        return ""
    return ("\nIf it comes from an untaken branch (where(x > 0, sqrt(x), 0.)), use the safe "
            "pattern sqrt(where(x > 0, x, 1.)) or cr.set_safe_zero_cotangents(True).")


def _kind_word(kind: str) -> str:
    return "nan" if "invalid" in kind else "inf"


def check_backward(node: Any, grads: list) -> None:
    """Raise AnomalyError if ``node``'s rule returned NaN/inf (called in anomaly mode)."""
    watch = _WATCHES[-1] if _WATCHES else None
    in_rule = watch.in_rule if watch is not None else []
    try:
        for i, g in enumerate(grads):
            if g is None or _finite(g):
                continue
            data = np.asarray(g.data if hasattr(g, "_version") else g)
            bad = "nan" if np.isnan(data).any() else "inf"
            raise AnomalyError(
                f"Function '{node.name}' returned {bad} values in its {i}th output (gradient for "
                f"input {i}).\nThe forward call that created it: {_site(node)}\n"
                f"{_origin(node, in_rule)}{_hint()}")
    finally:
        in_rule.clear()
