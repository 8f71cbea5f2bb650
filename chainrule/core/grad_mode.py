"""Grad mode: whether ops record a graph. Thread-local, usable as context managers and decorators."""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable

# Fields whose being set turns on a rare feature that ``ops.apply`` must look at.
_RARE = frozenset({"fw_levels", "hooks", "observers", "anomaly", "autocast", "vmap_levels", "recorder"})


class _State(threading.local):
    """Per-thread switches read on the hot path (``ops.apply`` reads ``STATE.__dict__`` once).

    ``rare`` is derived: setting any rare field recomputes it, so it cannot go stale; the rare
    fields are immutable (tuples or objects), so every change is such a setting. Set a field for a
    scope with ``state_scope``; add or remove an item of a tuple field with ``add_to``/``remove_from``.
    Hot paths (the engine, grad-mode scopes) may write a non-rare field through ``STATE.__dict__``.
    """

    def __init__(self) -> None:
        d = self.__dict__
        d["grad_enabled"] = True
        d["in_backward"] = False
        d["safe_zero"] = True          # the zero-cotangent convention (set_safe_zero_cotangents)
        d["fw_visible"] = 1 << 62      # tangents of levels above this are hidden (while a JVP rule runs)
        d["fw_levels"] = ()            # active forward-mode levels, innermost last
        d["fw_push"] = None            # forward mode's tangent pusher, set while a level is open
        d["hooks"] = ()                # active saved_tensors_hooks (pack, unpack)
        d["observers"] = ()            # profilers / tracers that watch every op
        d["anomaly"] = None            # the active detect_anomaly, or None
        d["autocast"] = None           # the active cr.autocast policy, or None
        d["vmap_levels"] = ()          # active cr.vmap levels (batch sizes and randomness), innermost last
        d["recorder"] = None           # cr.compile's recorder while it captures a step, or None
        d["rare"] = False              # any rare field set: apply looks at them only then
        d["hooked_leaves"] = set()     # weak refs to the leaves given post-accumulate-grad hooks here
        d["leaf_hooks"] = None         # the outermost accumulating backward's hook bookkeeping
        d["final_callbacks"] = None    # the running backward's queue_callback list, once one is queued

    def __setattr__(self, name: str, value: Any) -> None:
        _set(self.__dict__, name, value)


def _set(d: dict, name: str, value: Any) -> None:
    """Set field ``name`` of a thread's state dict ``d``, keeping ``rare`` right."""
    if name not in d:
        raise AttributeError(f"chainrule's thread state has no field {name!r}")
    d[name] = value
    if name in _RARE:
        d["rare"] = bool(d["fw_levels"] or d["hooks"] or d["observers"] or d["anomaly"] is not None
                         or d["autocast"] is not None or d["vmap_levels"]
                         or d["recorder"] is not None)


STATE = _State()


class _Process:
    """Process-wide settings (unlike ``STATE``, the same in every thread) that lower layers read:
    ``group``, the ``cr.distributed`` process group (its ``rank`` and ``size``) while one is
    initialized, so ``cr.data.DistributedSampler`` takes them from it without importing upward."""

    __slots__ = ("group",)

    def __init__(self) -> None:
        self.group: Any = None


PROCESS = _Process()


class state_scope:
    """Set fields of this thread's state for a ``with`` block, restoring them after.

    >>> from chainrule.core.grad_mode import STATE, state_scope
    >>> with state_scope(safe_zero=False):
    ...     STATE.safe_zero
    False
    """

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def __enter__(self) -> state_scope:
        self.prev = {name: getattr(STATE, name) for name in self.fields}
        for name, value in self.fields.items():
            setattr(STATE, name, value)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, value in self.prev.items():
            setattr(STATE, name, value)


def add_to(name: str, item: Any) -> None:
    """Append ``item`` to the tuple field ``name`` of this thread's state."""
    setattr(STATE, name, getattr(STATE, name) + (item,))


def remove_from(name: str, item: Any, state: dict | None = None) -> None:
    """Remove the last ``item`` (by identity) from the tuple field ``name`` of a thread's state
    (``state``: that thread's ``STATE.__dict__``; default this thread's)."""
    d = STATE.__dict__ if state is None else state
    items = d[name]
    for i in range(len(items) - 1, -1, -1):
        if items[i] is item:
            _set(d, name, items[:i] + items[i + 1:])
            return


def is_grad_enabled() -> bool:
    """Return whether ops currently record a graph.

    >>> import chainrule as cr
    >>> cr.is_grad_enabled()
    True
    """
    return STATE.grad_enabled


class set_grad_enabled:
    """Turn graph recording on or off; works as a call, a context manager and a decorator.

    >>> import chainrule as cr
    >>> with cr.set_grad_enabled(False):
    ...     cr.is_grad_enabled()
    False
    """

    def __init__(self, mode: bool) -> None:
        d = STATE.__dict__
        self.prev = d["grad_enabled"]
        self.mode = bool(mode)
        d["grad_enabled"] = self.mode

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        STATE.__dict__["grad_enabled"] = self.prev

    def __call__(self, fn: Callable) -> Callable:
        STATE.__dict__["grad_enabled"] = self.prev   # used as a decorator: undo the switch made in __init__
        return _decorate(fn, self.mode)


class _GradMode:
    """Base of ``no_grad``/``enable_grad``: a context manager, and a decorator with or without
    parentheses (``@cr.no_grad`` and ``@cr.no_grad()``)."""

    mode = True

    def __new__(cls, fn: Callable | None = None) -> Any:
        self = super().__new__(cls)
        return _decorate(fn, cls.mode) if callable(fn) else self

    def __init__(self, fn: Callable | None = None) -> None:
        pass

    def __enter__(self) -> None:
        d = STATE.__dict__
        self.prev = d["grad_enabled"]
        d["grad_enabled"] = self.mode

    def __exit__(self, *exc: object) -> None:
        STATE.__dict__["grad_enabled"] = self.prev

    def __call__(self, fn: Callable) -> Callable:
        return _decorate(fn, self.mode)


class _Scope(_GradMode):
    def __init__(self, mode: bool) -> None:
        self.mode = mode


def _decorate(fn: Callable, mode: bool) -> Callable:
    """``fn`` run with grad mode ``mode``; a generator function's body runs in it at every step
    (the caller's mode is restored between steps, as PyTorch does)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args: Any, **kwargs: Any) -> Any:
            gen = fn(*args, **kwargs)
            step, value = gen.send, None
            while True:
                try:
                    with _Scope(mode):
                        out = step(value)
                except StopIteration as stop:
                    return stop.value
                try:
                    step, value = gen.send, (yield out)
                except GeneratorExit:
                    with _Scope(mode):
                        gen.close()
                    raise
                except BaseException as e:  # noqa: BLE001 - thrown into the generator, as PyTorch
                    step, value = gen.throw, e
        return generator

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _Scope(mode):
            return fn(*args, **kwargs)
    return wrapper


class no_grad(_GradMode):
    """Context manager / decorator: record nothing, save nothing.

    >>> import chainrule as cr
    >>> x = cr.tensor([1.0], requires_grad=True)
    >>> with cr.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    mode = False


class enable_grad(_GradMode):
    """Context manager / decorator: record the graph even inside ``no_grad``.

    >>> import chainrule as cr
    >>> with cr.no_grad(), cr.enable_grad():
    ...     cr.is_grad_enabled()
    True
    """

    mode = True
