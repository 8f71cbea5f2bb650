"""Mixed-precision policy: dtype facts, casting parameters, float32 master weights, per-step diagnostics.

The recipe (``docs/precision.md``): the model computes in bfloat16/float16 while the optimizer
updates float32 master copies, so updates smaller than the low dtype's spacing accumulate instead of
being rounded away. With float32 parameters, ``cr.autocast`` alone gives this (the parameters are the
masters and matmuls see a rounded copy). With parameters stored in 16 bits (half the memory),
``MasterWeights`` keeps the float32 copies and copies rounded values back after every step.
"""
from __future__ import annotations

from typing import Any, Iterable

from chainrule.core._backend import np
from chainrule.core._dtypes import LOW_PRECISION, accum_dtype, bfloat16, float16, float32, is_floating
from chainrule.core.errors import DTypeError
from chainrule.core.tensor import Tensor, wrap
from chainrule.numpy import raw


def finfo(dtype: Any) -> Any:
    """Machine limits of a float dtype, including bfloat16 and FP8 (NumPy's ``finfo`` + ml_dtypes).

    >>> import chainrule as cr
    >>> float(cr.precision.finfo(cr.float16).smallest_subnormal)
    5.960464477539063e-08
    """
    import ml_dtypes
    return ml_dtypes.finfo(np.dtype(dtype))


def spacing(x: float, dtype: Any) -> float:
    """Gap between ``x`` and the next larger value of ``dtype``: updates below half of it are lost.

    >>> import chainrule as cr
    >>> cr.precision.spacing(1.0, cr.bfloat16), cr.precision.spacing(1.0, cr.float16)
    (0.0078125, 0.0009765625)
    """
    d = np.dtype(dtype)
    v = np.array(x, dtype=d)
    up = np.nextafter(v.astype(np.float64), np.inf)
    nxt = up.astype(d)
    while float(nxt) == float(v):          # nextafter in float64 rounds back to x in a narrow dtype
        up = up + (up - v.astype(np.float64))
        nxt = up.astype(d)
    return float(nxt.astype(np.float64) - v.astype(np.float64))


def cast_params(params: Iterable[Any], dtype: Any) -> list:
    """Cast parameters' data in place to ``dtype`` (their gradients then arrive in ``dtype`` too).

    >>> import chainrule as cr
    >>> p = cr.tensor([1.0, 2.0], requires_grad=True)
    >>> cr.precision.cast_params([p], cr.bfloat16)[0].dtype
    dtype(bfloat16)
    """
    d = np.dtype(dtype)
    if not is_floating(d):
        raise DTypeError(f"cast_params: {d} is not a floating dtype; use cr.float32, cr.bfloat16 or "
                         f"cr.float16")
    params = list(params)
    for p in params:
        p.data = p.data.astype(d)
        p.grad = None
    return params


def grad_stats(params: Iterable[Any]) -> dict:
    """Fractions of gradient elements that are zero (underflowed) and inf/NaN (overflowed).

    >>> import chainrule as cr
    >>> p = cr.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True); p.grad = cr.tensor([0.0, 1.0, 1.0, 1.0])
    >>> cr.precision.grad_stats([p])
    {'underflow': 0.25, 'overflow': 0.0}
    """
    zeros = bad = total = 0
    for p in params:
        if p.grad is None:
            continue
        g = raw(p.grad)
        g = g.astype(float32) if g.dtype in LOW_PRECISION else g
        zeros += int(np.count_nonzero(g == 0))
        bad += int(g.size - np.count_nonzero(np.isfinite(g)))
        total += g.size
    return {"underflow": zeros / max(total, 1), "overflow": bad / max(total, 1)}


class StaleMeter:
    """Snapshot parameters before an update; ``fraction()`` afterwards gives the share of elements that
    changed in full precision but whose value in ``dtype`` did not (a stale update).

    >>> import chainrule as cr
    >>> p = cr.tensor([1.0, 1.0], requires_grad=True)
    >>> m = cr.precision.StaleMeter([p], cr.bfloat16)
    >>> p.data = p.data - [1e-4, 1e-1]
    >>> m.fraction()
    0.5
    """

    def __init__(self, params: Iterable[Any], dtype: Any) -> None:
        self.params = list(params)
        self.dtype = np.dtype(dtype)
        self.before = [raw(p).copy() for p in self.params]

    def fraction(self) -> float:
        changed = stale = 0
        for p, old in zip(self.params, self.before):
            new = raw(p)
            moved = new != old
            same_low = new.astype(self.dtype) == old.astype(self.dtype)
            changed += int(np.count_nonzero(moved))
            stale += int(np.count_nonzero(moved & same_low))
        return stale / changed if changed else 0.0


class MasterWeights:
    """Float32 master copies of low-precision model parameters, updated by the optimizer.

    Build the optimizer on ``mw.params`` (the masters). Each iteration: backward on the model, then
    ``mw.step(optimizer)`` (or ``mw.step(optimizer, scaler)``): gradients are copied to the masters
    in float32, the optimizer updates them, and the rounded values are written back to the model.
    ``history`` holds per-step diagnostics: underflow, overflow and stale fractions.

    >>> import chainrule as cr
    >>> w = cr.tensor([1.0], requires_grad=True)
    >>> mw = cr.precision.MasterWeights([w], dtype=cr.bfloat16)
    >>> w.dtype, mw.params[0].dtype
    (dtype(bfloat16), dtype('float32'))
    """

    def __init__(self, model_params: Iterable[Any], dtype: Any = bfloat16) -> None:
        self.dtype = np.dtype(dtype)
        if self.dtype not in LOW_PRECISION:
            raise DTypeError(f"MasterWeights: dtype must be a 16-bit or FP8 float (cr.bfloat16, "
                             f"cr.float16), got {self.dtype}; float32 models need no master copy")
        self.model_params = list(model_params)
        self.params = [Tensor(raw(p).astype(float32), requires_grad=True) for p in self.model_params]
        cast_params(self.model_params, self.dtype)
        self.history: list[dict] = []

    def step(self, optimizer: Any, scaler: Any = None) -> Any:
        """Copy gradients to the masters, step (through ``scaler`` if given), round back to the model."""
        for p, m in zip(self.model_params, self.params):
            m.grad = None if p.grad is None else wrap(raw(p.grad).astype(float32))
        stats = grad_stats(self.params)
        meter = StaleMeter(self.params, self.dtype)
        out = scaler.step(optimizer) if scaler is not None else optimizer.step()
        for p, m in zip(self.model_params, self.params):
            p.data = raw(m).astype(self.dtype)
        stats["stale"] = meter.fraction()
        self.history.append(stats)
        return out

    def zero_grad(self) -> None:
        """Clear the model's (low-precision) gradients; the optimizer clears the masters'."""
        for p in self.model_params:
            p.grad = None


def summarize(history: list[dict]) -> str:
    """One line over per-step diagnostics (from ``GradScaler.history`` or ``MasterWeights.history``).

    >>> from chainrule.precision import summarize
    >>> summarize([{"underflow": 0.1, "overflow": 0.0, "stale": 0.5, "scale": 8.0, "skipped": False}])
    'steps 1, skipped 0, grad zeros (underflow) 10.00%, overflow 0.00%, stale updates 50.00%, final scale 8'
    """
    def mean(key: str) -> float:
        vals = [h[key] for h in history if key in h and np.isfinite(h[key])]
        return float(np.mean(vals)) if vals else float("nan")
    line = (f"steps {len(history)}, skipped {sum(bool(h.get('skipped')) for h in history)}, "
            f"grad zeros (underflow) {mean('underflow'):.2%}, overflow {mean('overflow'):.2%}, "
            f"stale updates {mean('stale'):.2%}")
    if history and "scale" in history[-1]:
        line += f", final scale {history[-1]['scale']:g}"
    return line


def plot_scale(history: list[dict], path: str) -> bool:
    """Plot the loss scale per step to ``path`` (PNG); False if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.semilogy([h["scale"] for h in history], drawstyle="steps-post")
    skipped = [i for i, h in enumerate(history) if h.get("skipped")]
    ax.plot(skipped, [history[i]["scale"] for i in skipped], "rx", label="skipped step")
    ax.set_xlabel("step")
    ax.set_ylabel("loss scale")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


__all__ = ["plot_scale", "MasterWeights", "StaleMeter", "accum_dtype", "cast_params", "finfo", "grad_stats",
           "spacing", "summarize", "float16", "bfloat16"]
