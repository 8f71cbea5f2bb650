"""Grad mode: whether ops record a graph. Thread-local, usable as context managers and decorators."""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable


class _State(threading.local):
    """Per-thread switches read on the hot path (one attribute lookup each)."""

    def __init__(self) -> None:
        self.grad_enabled = True
        self.fw_levels: list[int] = []    # active forward-mode levels, innermost last
        self.fw_visible = 1 << 62         # tangents of levels above this are hidden (while a JVP rule runs)
        self.hooks: list[Any] = []        # active saved_tensors_hooks (pack, unpack)
        self.observers: list[Any] = []    # profilers / tracers that watch every op
        self.anomaly = False
        self.in_backward = False
        self.autocast: Any = None         # active cr.autocast policy (precision.py), or None
        self.rare = False                 # any of the above but grad_enabled is on: see refresh_rare


STATE = _State()


def refresh_rare(state: dict | None = None) -> None:
    """Recompute ``STATE.rare``; call it after changing fw_levels, hooks, observers, anomaly or
    autocast. The hot path (``ops.apply``) reads this one flag and skips every rare feature when
    it is False: thread-local lookups cost ~80 ns each, so one instead of eight per op matters.
    ``state`` is a thread's ``STATE.__dict__`` (default: this thread's)."""
    st = STATE.__dict__ if state is None else state
    st["rare"] = bool(st["fw_levels"] or st["hooks"] or st["observers"] or st["anomaly"]
                      or st["autocast"] is not None)


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
        self.prev = STATE.grad_enabled
        self.mode = bool(mode)
        STATE.grad_enabled = self.mode

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        STATE.grad_enabled = self.prev

    def __call__(self, fn: Callable) -> Callable:
        STATE.grad_enabled = self.prev   # used as a decorator: undo the switch made in __init__
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
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        STATE.grad_enabled = self.prev

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
