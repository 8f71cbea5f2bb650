"""Automatic mixed precision: ``autocast`` (which op runs in which dtype) and ``GradScaler`` (loss scaling).

Autocast follows PyTorch's op lists, declared in the op table (``Primitive.autocast``): matmul-class
primitives (matmul, linear, einsum) run in the low dtype; reductions, softmax/log_softmax, logsumexp,
exp/log/pow-like ops and linear-algebra solvers run in float32; every other op runs in its inputs'
dtype with NumPy's promotion. Only float32 (and 16-bit) inputs are cast; float64 is left alone, as
in PyTorch. The backward runs in the dtypes the forward chose (autocast does not act inside the engine).
"""
from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

from chainrule.amp.precision import StaleMeter, grad_stats
from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, bfloat16, float16, float32, float64, is_floating
from chainrule.core._registry import OpObserver
from chainrule.core.errors import ChainruleError
from chainrule.core.grad_mode import STATE, add_to, remove_from
from chainrule.core.tensor import wrap
from chainrule.numpy import PRIMITIVES, astype, raw


def op_policy(name: str) -> str:
    """Which dtype autocast runs primitive ``name`` in: ``"low"``, ``"float32"`` or ``"input"``
    (its ``autocast`` field in the op table).

    >>> from chainrule.amp import op_policy
    >>> op_policy("matmul"), op_policy("log_softmax"), op_policy("relu")
    ('low', 'float32', 'input')
    """
    return PRIMITIVES[name].autocast


class autocast:
    """Run matmul-class ops in ``dtype`` and precision-sensitive ops in float32 (context or decorator).

    >>> import chainrule as cr
    >>> x = cr.ones((2, 3))
    >>> with cr.autocast(dtype=cr.bfloat16):
    ...     (x @ x.T).dtype, cr.softmax(x @ x.T).dtype
    (dtype(bfloat16), dtype('float32'))
    """

    def __init__(self, dtype: Any = bfloat16, enabled: bool = True) -> None:
        self.dtype = np.dtype(dtype)
        if self.dtype not in (bfloat16, float16, float32):
            raise ValueError(f"autocast: dtype must be cr.bfloat16, cr.float16 or cr.float32, got "
                             f"{self.dtype}")
        self.enabled = enabled

    def __enter__(self) -> autocast:
        self._prev = STATE.autocast
        STATE.autocast = self if self.enabled else None
        return self

    def __exit__(self, *exc: object) -> None:
        STATE.autocast = self._prev

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapper

    def cast_inputs(self, prim: Any, xs: tuple) -> tuple:
        """Called by ``ops.apply`` for every op while this autocast is active."""
        policy = prim.autocast
        if policy == "input" or STATE.in_backward:
            return xs
        target = self.dtype if policy == "low" else float32
        return tuple([_cast(x, target) for x in xs])


def _cast(x: Any, dtype: np.dtype) -> Any:
    d = getattr(x, "dtype", None)
    if d is None or d == dtype or d == float64 or not is_floating(d) or d.kind == "c":
        return x
    return astype(x, dtype)


# ----- loss scaling -----
class NonFiniteGradientError(ChainruleError):
    """Backing off the loss scale did not clear non-finite gradients: a real NaN/inf, not an overflow."""


class _FirstNonFinite(OpObserver):
    """Observer: remembers the first op whose output is NaN/inf while all its float inputs are finite."""

    def __init__(self) -> None:
        self.found: str | None = None

    def on_op(self, prim: Any, datas: list, params: dict, out: Any) -> None:
        if self.found is not None or not _bad(out):
            return
        if any(_bad(d) for d in datas if isinstance(d, np.ndarray)):
            return
        phase = "backward" if STATE.in_backward else "forward"
        ins = ", ".join(f"{d.shape} {d.dtype}" for d in datas if isinstance(d, np.ndarray))
        self.found = f"'{prim.name}' in the {phase} pass (inputs {ins})"


def _bad(a: Any) -> bool:
    return isinstance(a, np.ndarray) and is_floating(a.dtype) and not np.isfinite(
        a.astype(float32) if a.dtype in LOW_PRECISION else a).all()


class GradScaler:
    """Dynamic (or static) loss scaling with PyTorch's ``torch.amp.GradScaler`` semantics.

    ``scale(loss)`` multiplies the loss; ``unscale_(opt)`` divides the gradients and looks for inf/NaN;
    ``step(opt)`` skips the update if any was found; ``update()`` halves the scale after an overflow
    and doubles it after ``growth_interval`` clean steps. Beyond PyTorch: ``dynamic=False`` keeps the
    scale fixed, the scale never falls below ``min_scale``, and after ``max_backoffs`` consecutive
    overflows the next one raises ``NonFiniteGradientError`` naming the op that made the first NaN/inf.
    Per-step diagnostics (``history``): scale, skipped, fraction of gradient elements that are zero
    (underflow) or non-finite (overflow), and the fraction of changed parameters whose value in
    ``stats_dtype`` did not change (stale updates).

    >>> import chainrule as cr
    >>> s = cr.amp.GradScaler(init_scale=8.0, growth_interval=1)
    >>> s.scale(cr.tensor(1.5)).item(), s.get_scale()
    (12.0, 8.0)
    """

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True,
                 dynamic: bool = True, min_scale: float = 2.0 ** -14, max_backoffs: int | None = 24,
                 stats_dtype: Any = float16) -> None:
        if not growth_factor > 1.0 or not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: need growth_factor > 1 and 0 < backoff_factor < 1, got "
                             f"{growth_factor} and {backoff_factor}")
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._enabled, self.dynamic = enabled, dynamic
        self.min_scale, self.max_backoffs = float(min_scale), max_backoffs
        self.stats_dtype = np.dtype(stats_dtype)
        self._opt_states: dict[int, dict] = {}
        self._backoffs = 0
        self._watch: _FirstNonFinite | None = None
        self.history: list[dict] = []

    def is_enabled(self) -> bool:
        """False for ``GradScaler(enabled=False)``, which then passes everything through."""
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def scale(self, outputs: Any) -> Any:
        """Multiply ``outputs`` (a Tensor or a list/tuple of them) by the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale         # a Python float: the loss keeps its dtype

    def _state(self, optimizer: Any, caller: str, misuse: dict[str, str]) -> dict:
        """The optimizer's state this iteration; raise ``misuse[stage]`` if ``caller`` is out of order."""
        st = self._opt_states.setdefault(id(optimizer), {"stage": "ready", "found_inf": False})
        if st["stage"] in misuse:
            raise RuntimeError(f"GradScaler.{caller}: {misuse[st['stage']]}")
        return st

    def unscale_(self, optimizer: Any) -> None:
        """Divide the optimizer's gradients by the scale in place and record whether any is inf/NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer, "unscale_", {
            "unscaled": "already called on this optimizer since the last update(); call it once per step",
            "stepped": "called after step(); call update() first"})
        inv_scale = float32.type(1.0 / np.float64(self._scale))
        params = [p for p in _params(optimizer) if p.grad is not None]
        for i, p in enumerate(params):
            g = raw(p.grad)
            if g.dtype == float16:
                raise TypeError(f"GradScaler.unscale_: parameter {i} {g.shape} has float16 gradients; "
                                f"unscaling in float16 would underflow again. Keep float32 parameters "
                                f"(autocast casts them for matmuls) or use cr.precision.MasterWeights")
        st["stats"] = grad_stats(params)
        st["found_inf"] = st["stats"]["overflow"] > 0
        st["stage"] = "unscaled"
        for p in params:
            g = raw(p.grad)
            if g.dtype in LOW_PRECISION:      # float32/float64 gradients keep their precision
                p.grad = wrap((g.astype(float32) * inv_scale).astype(g.dtype))
            else:
                p.grad = wrap(g * g.dtype.type(1.0 / np.float64(self._scale)))

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step()`` unless a gradient is inf/NaN (then the step is skipped); returns its result."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: closures are not supported (as in PyTorch)")
        st = self._state(optimizer, "step", {
            "stepped": "already called on this optimizer since the last update(); call update() once per iteration"})
        if st["stage"] == "ready":
            self.unscale_(optimizer)
        st["stage"] = "stepped"
        if st["found_inf"]:
            st["stats"]["stale"] = float("nan")
            return None
        meter = StaleMeter(_params(optimizer), self.stats_dtype)
        out = optimizer.step(*args, **kwargs)
        st["stats"]["stale"] = meter.fraction()
        return out

    def update(self, new_scale: float | None = None) -> None:
        """Adjust the scale after a step: back off on an overflow, grow after ``growth_interval`` clean steps."""
        if not self._enabled:
            return
        found_inf = any(s["found_inf"] for s in self._opt_states.values())
        stats = [s.get("stats", {}) for s in self._opt_states.values()]
        if new_scale is not None:
            self._scale = float(raw(new_scale))
        elif self.dynamic:
            if found_inf:
                self._scale = max(self._scale * self._backoff_factor, self.min_scale)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    if grown <= float(np.finfo(float32).max):
                        self._scale = grown
                    self._growth_tracker = 0
        self._check_backoffs(found_inf)
        record = {"scale": self._scale, "skipped": found_inf}
        for key in ("underflow", "overflow", "stale"):
            vals = [s[key] for s in stats if key in s]
            record[key] = float(np.mean(vals)) if vals else float("nan")
        self.history.append(record)
        self._opt_states = {}

    def _check_backoffs(self, found_inf: bool) -> None:
        self._backoffs = self._backoffs + 1 if found_inf else 0
        if self._watch is not None:
            watch, self._watch = self._watch, None
            self._unwatch()
            if found_inf:
                raise NonFiniteGradientError(
                    f"GradScaler: {self._backoffs} consecutive steps had inf/NaN gradients and backing "
                    f"off to scale {self._scale:g} did not clear them, so this is not an overflow. The "
                    f"first non-finite value was created by {watch.found or 'an op outside the graph'}. "
                    f"Fix that op's input (e.g. clamp before log/sqrt, divide by a safe value), or run "
                    f"one step under cr.detect_anomaly() to see where it was called")
        if self.max_backoffs is not None and self._backoffs >= self.max_backoffs:
            self._watch = _FirstNonFinite()       # watch the next iteration, forward and backward
            add_to("observers", self._watch)
            # removed after the next update, or when the scaler is dropped mid-way (an observer left
            # behind would slow every op of this thread)
            self._unwatch = weakref.finalize(self, remove_from, "observers", self._watch, STATE.__dict__)

    def state_dict(self) -> dict:
        """The scaler's state (empty when disabled), as in PyTorch."""
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: dict) -> None:
        """Restore a ``state_dict()``."""
        if not self._enabled:
            return
        if not state:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty (saved from a "
                               "disabled scaler?)")
        self._scale = float(state["scale"])
        self._growth_factor = float(state["growth_factor"])
        self._backoff_factor = float(state["backoff_factor"])
        self._growth_interval = int(state["growth_interval"])
        self._growth_tracker = int(state["_growth_tracker"])


def _params(optimizer: Any) -> list:
    return [p for group in optimizer.param_groups for p in group["params"]]
