"""Small pieces shared by the layer modules of ``chainrule.nn``: an argument check and a base layer."""
from __future__ import annotations

from typing import Any, Callable

from chainrule.core._backend import np
from chainrule.nn.module import Module


def _positive_int(n: Any, name: str, who: str) -> int:
    """``n`` as an int; a ValueError naming ``who`` and ``name`` unless it is a positive integer (not a bool)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{who}: {name} must be a positive integer, got {n!r}")
    return int(n)


class _FunctionalLayer(Module):
    """A layer over one functional: the keyword ``arguments`` given to ``__init__`` become attributes,
    ``forward(input)`` is ``fn(input, *arguments)`` (in their order) and ``extra_repr`` is ``name=value, ...``."""

    fn: Callable

    def __init__(self, **arguments: Any) -> None:
        super().__init__()
        for name, value in arguments.items():
            setattr(self, name, value)
        self._arguments = tuple(arguments)

    def forward(self, input: Any) -> Any:
        return self.fn(input, *(getattr(self, name) for name in self._arguments))

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)}" for name in self._arguments)
