"""detect_anomaly: find the op whose backward produced the first NaN/inf, and where it was created."""
from __future__ import annotations

import traceback
from typing import Any

from .._backend import np
from ..errors import GraphError
from ..grad_mode import STATE


class AnomalyError(GraphError):
    """A backward rule produced NaN or inf under ``detect_anomaly``."""


class detect_anomaly:
    """Context manager: record where each op was created and check every backward result.

    >>> import chainrule as cr
    >>> x = cr.tensor([-1.0], requires_grad=True)
    >>> with cr.detect_anomaly():
    ...     try:
    ...         cr.sqrt(x).sum().backward()
    ...     except cr.AnomalyError as e:
    ...         print("SqrtBackward" in str(e))
    True
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> detect_anomaly:
        self.prev = STATE.anomaly
        STATE.anomaly = self.check_nan
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.anomaly = self.prev


def remember_creation(node: Any) -> None:
    """Store the user's call site of the op that created ``node`` (only under detect_anomaly)."""
    stack = traceback.extract_stack()[:-3]
    user = [f for f in stack if "/chainrule/" not in f.filename.replace("\\", "/")] or stack
    if node.extra is None:
        node.extra = {}
    node.extra["trace"] = user


def check_backward(node: Any, grads: list) -> None:
    for i, g in enumerate(grads):
        if g is None:
            continue
        data = np.asarray(g.data if hasattr(g, "_version") else g)
        if data.dtype.kind in "fc" and not np.all(np.isfinite(data)):
            bad = "nan" if np.isnan(data).any() else "inf"
            where = ""
            trace = (node.extra or {}).get("trace")
            if trace:
                f = trace[-1]
                where = (f"\nThe forward call that created it: {f.filename}, line {f.lineno}, in "
                         f"{f.name}\n    {f.line}")
            raise AnomalyError(f"Function '{node.name}' returned {bad} values in its {i}th output "
                               f"(gradient for input {i}).{where}")
