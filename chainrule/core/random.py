"""chainrule's random state: one default ``numpy.random.Generator`` that random ops (dropout,
sampling, init) use unless given a ``generator=``. ``checkpoint`` saves and restores it."""
from __future__ import annotations

from typing import Any, Callable

from chainrule.core._backend import np
from chainrule.core.grad_mode import STATE

__all__ = ["default_generator", "draw", "get_generator", "get_rng_state", "manual_seed", "set_rng_state"]

default_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> np.random.Generator:
    """Reseed the default generator (and return it).

    >>> import chainrule as cr
    >>> _ = cr.random.manual_seed(1); a = cr.random.default_generator.random()
    >>> _ = cr.random.manual_seed(1); a == cr.random.default_generator.random()
    True
    """
    global default_generator
    default_generator = np.random.default_rng(seed)
    return default_generator


def get_generator(generator: Any = None) -> np.random.Generator:
    """The generator to use: the one passed, or the default; inside ``cr.vmap`` as its
    ``randomness`` says (independent draws per example, one shared draw, or an error)."""
    gen = default_generator if generator is None else generator
    if STATE.recorder is not None:               # cr.compile: a draw a replay would not repeat (see draw)
        STATE.recorder.on_random()
    for level in STATE.vmap_levels:          # outermost first: each level wraps the one outside it
        gen = level.generator(gen)
    return gen


def draw(kernel: Callable, generator: Any = None, *args: Any) -> Any:
    """``kernel(get_generator(generator), *args)``: a random draw (with the NumPy code that shapes it)
    that ``cr.compile`` replays, from the generator of the replayed call, so the stream is eager's.

    >>> import chainrule as cr
    >>> mask = lambda gen, shape: gen.random(shape) >= 0.5
    >>> _ = cr.random.manual_seed(3); a = cr.random.draw(mask, None, (4,))
    >>> _ = cr.random.manual_seed(3); bool((a == cr.random.draw(mask, None, (4,))).all())
    True
    """
    rec = STATE.recorder
    if rec is not None and not STATE.vmap_levels:
        return rec.on_draw(kernel, generator, args)
    return kernel(get_generator(generator), *args)


def get_rng_state(parts: Any = ("default", "numpy")) -> dict:
    """Snapshot of the default generator and NumPy's global RNG (restore with ``set_rng_state``);
    ``parts`` picks which of the two."""
    state = {}
    if "default" in parts:
        state["default"] = default_generator.bit_generator.state
    if "numpy" in parts:
        state["numpy"] = np.random.get_state()
    return state


def set_rng_state(state: dict) -> None:
    """Restore a snapshot from ``get_rng_state`` (a part it lacks is left as it is)."""
    if "default" in state:
        default_generator.bit_generator.state = state["default"]
    if "numpy" in state:
        np.random.set_state(state["numpy"])


def used_rng_state(before: dict) -> dict:
    """The part of snapshot ``before`` whose generator has drawn since: what a replay must restore.

    NumPy's global RNG costs ~50 µs to read or write, so ``checkpoint`` keeps it only if the
    function drew from it (the default generator is cheap and always kept).

    >>> import numpy as np, chainrule as cr
    >>> s = cr.random.get_rng_state(); sorted(cr.random.used_rng_state(s))
    ['default']
    >>> _ = np.random.rand(); sorted(cr.random.used_rng_state(s))
    ['default', 'numpy']
    """
    now = np.random.get_state()
    kept = before["numpy"]
    same = all(a is b or (np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b)
               for a, b in zip(now, kept))
    return {"default": before["default"]} if same else before
