"""NaN/inf debugging: ``detect_anomaly`` and the safe-zero-cotangent convention.

Under ``detect_anomaly`` NumPy's floating-point error state is set to ``call`` (divide, invalid,
overflow), so NumPy reports the moment an op *creates* a NaN/inf from finite values (it stays
silent when a NaN is merely passed on). A watcher on ``STATE.observers`` turns each report into
the name of the op that just ran. When a backward rule returns NaN/inf, the error names that
node, the forward call site that created it, and where the first NaN came from: an op inside the
rule, the node's own forward, or, found by walking the graph back through the values that held
NaN/inf (each node records whether its result did), the nearest forward op that created one from
finite values, or an input that already held it. Outside anomaly mode the cost is the engine's
``if STATE.anomaly`` flag check.
"""
from __future__ import annotations

import traceback
from collections import deque
from typing import Any

from chainrule.core._backend import np
from chainrule.core.errors import GraphError
from chainrule.core.grad_mode import STATE, add_to, remove_from
from chainrule.core.graph import Packed


class AnomalyError(GraphError):
    """A backward rule produced NaN or inf under ``detect_anomaly``."""


def set_safe_zero_cotangents(flag: bool) -> bool:
    """Keep an exactly-zero cotangent zero through rules with an inf/NaN local derivative.

    On by default: ``where(x > 0, sqrt(x), 0.)`` then has gradient 0 (not NaN) at x <= 0. Pass
    False for PyTorch's/JAX's 0 * inf = NaN. Returns the previous setting. Per thread, as grad mode.

    >>> import chainrule as cr
    >>> x = cr.tensor([-1.0, 4.0], requires_grad=True)
    >>> cr.where(x > 0, cr.sqrt(x), 0.0).sum().backward(); x.grad
    tensor([0.  , 0.25])
    """
    prev = STATE.safe_zero
    STATE.safe_zero = bool(flag)
    return prev


class _FPWatch:
    """Observer: remembers which op made NumPy report a floating-point error."""

    def __init__(self) -> None:
        self.flag: str | None = None       # set by NumPy's callback while an op runs
        self.last: str | None = None       # error of the op that ran last (for remember_creation)
        self.last_out: Any = None          # and its result
        self.in_rule: list = []            # (op, error) created while backward rules ran

    def on_fp_error(self, kind: str, code: int) -> None:
        if self.flag is None:
            self.flag = kind

    def on_op(self, prim: Any, datas: list, params: dict, out: Any) -> None:
        self.last, self.flag, self.last_out = self.flag, None, out
        if self.last is not None and STATE.in_backward:
            self.in_rule.append((prim.name, self.last))

    def on_save(self, node: Any) -> None:
        pass

    def on_save_function(self, ctx: Any) -> None:
        pass


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
        self.watch = _FPWatch()
        self.errstate = np.errstate(call=self.watch.on_fp_error, divide="call", invalid="call",
                                    over="call")
        self.errstate.__enter__()
        add_to("observers", self.watch)
        # apply and the engine reach this object through the thread state (remember, check)
        STATE.anomaly = self if self.check_nan else None
        return self

    def __exit__(self, *exc: object) -> None:
        remove_from("observers", self.watch)
        self.watch.last_out = None
        self.errstate.__exit__(*exc)
        STATE.anomaly = self.prev

    def remember(self, node: Any) -> None:
        remember_creation(node, self.watch)

    def check(self, node: Any, grads: list) -> list:
        """Raise if ``node``'s rule returned NaN/inf; return ``grads`` (the engine hands them on)."""
        check_backward(node, grads, self.watch)
        return grads


def remember_creation(node: Any, watch: _FPWatch) -> None:
    """Store the user's call site of the op that created ``node`` (only under detect_anomaly)."""
    stack = traceback.extract_stack()[:-3]
    user = [f for f in stack if "/chainrule/" not in f.filename.replace("\\", "/")] or stack
    if node.extra is None:
        node.extra = {}
    node.extra["trace"] = user
    if watch.last is not None:
        node.extra["fp"] = watch.last
    # whether the result held NaN/inf: lets the origin search skip finite values (a NaN masked by
    # where() is harmless) through ops that keep nothing
    if watch.last_out is not None and not _finite(watch.last_out):
        node.extra["bad"] = _bad_word(watch.last_out)
    watch.last_out = None


def _site(node: Any) -> str:
    trace = (getattr(node, "extra", None) or {}).get("trace")
    if not trace:
        return "(call site unknown: it was created outside detect_anomaly)"
    f = trace[-1]
    return f"{f.filename}, line {f.lineno}, in {f.name}\n    {f.line}"


def _op_name(node: Any) -> str:
    prim = getattr(node, "prim", None)
    return prim.name if prim is not None else node.name


def _data(x: Any) -> Any:
    return np.asarray(x.data if hasattr(x, "_version") else x)


def _finite(x: Any) -> bool:
    data = _data(x)
    return data.dtype.kind not in "fc" or bool(np.all(np.isfinite(data)))


def _bad_word(x: Any) -> str:
    return "nan" if np.isnan(_data(x)).any() else "inf"


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
    return _walk(node)


def _walk(start: Any) -> str:
    """Breadth-first from ``start`` back through the values that held NaN/inf or are unknown, to
    the nearest op that created one from finite values, or to an input that already held it.
    Iterative and visiting each node once: graphs can be 100,000 nodes deep."""
    seen = {start}
    todo = deque([(start, 0)])
    tainted = False                     # met a NaN/inf on the way
    while todo:
        node, depth = todo.popleft()
        bad = _output_state(node) if depth else None
        if bad == "":
            continue                    # this path carries finite values: the NaN is not from here
        tainted = tainted or bad is not None
        fp = (node.extra or {}).get("fp") if depth else None
        if fp is not None:
            return _created(node, fp, bad or _kind_word(fp), depth)
        suspect = False                 # an input that held NaN/inf or is unknown
        saved = getattr(node, "saved", None)
        saved = saved if type(saved) in (list, tuple) else ()      # () too once freed
        for i, edge in enumerate(node.edges):
            child = edge[0] if edge is not None else None
            leaf = getattr(child, "variable", None)                 # an AccumulateGrad's tensor
            x = _known(saved[i]) if i < len(saved) else None
            if x is None and leaf is not None:
                x = leaf()
            if x is not None and _finite(x):
                continue
            suspect = True
            if x is not None and (child is None or leaf is not None):
                return (f"No op created the NaN/inf: input {i} of '{_op_name(node)}' already "
                        f"held {_bad_word(x)} (a {'leaf ' if leaf is not None else ''}tensor "
                        f"of shape {tuple(np.shape(_data(x)))}) when it was called at "
                        f"{_site(node)}")
            if child is not None and child not in seen:
                seen.add(child)
                todo.append((child, depth + 1))
        if bad and not suspect:         # NumPy raised nothing (the op silenced it), yet it did
            return _created(node, "no floating-point error reported", bad, depth)
    if tainted:
        return ("No op recorded under detect_anomaly created the NaN/inf this rule used: it came "
                "from a cr.Function's forward, an op recorded outside detect_anomaly, or an input "
                "the graph does not keep.")
    return "Its inputs were finite: the rule's local derivative is inf/NaN at this point."


def _created(node: Any, fp: str, word: str, depth: int) -> str:
    op = _op_name(node)
    return (f"The first NaN/inf was created in the forward pass by '{op}' ({fp}) at {_site(node)}"
            f"\n'{op}' created {word} there from finite values, {depth} node(s) before this one "
            f"in the graph.")


def _output_state(node: Any) -> str | None:
    """'nan' or 'inf' if the node's result held them, '' if it was finite, None if unknown."""
    extra = node.extra or {}
    if "trace" in extra:                # recorded under detect_anomaly: remember_creation knows
        return extra.get("bad", "")
    out = _known(getattr(node, "out_data", None))
    return None if out is None else "" if _finite(out) else _bad_word(out)


def _known(x: Any) -> Any:
    """A saved value, or None when it is not kept (a packed one whose tensor is gone)."""
    return x.source() if type(x) is Packed else x


def _hint() -> str:
    if STATE.safe_zero:
        return ""
    return ("\nIf it comes from an untaken branch (where(x > 0, sqrt(x), 0.)), use the safe "
            "pattern sqrt(where(x > 0, x, 1.)) or cr.set_safe_zero_cotangents(True).")


def _kind_word(kind: str) -> str:
    return "nan" if "invalid" in kind else "inf"


def check_backward(node: Any, grads: list, watch: _FPWatch) -> None:
    """Raise AnomalyError if ``node``'s rule returned NaN/inf (called in anomaly mode)."""
    in_rule = watch.in_rule
    try:
        for i, g in enumerate(grads):
            if g is None or _finite(g):
                continue
            raise AnomalyError(
                f"Function '{node.name}' returned {_bad_word(g)} values in its {i}th output "
                f"(gradient for input {i}).\nThe forward call that created it: {_site(node)}\n"
                f"{_origin(node, in_rule)}{_hint()}")
    finally:
        in_rule.clear()
