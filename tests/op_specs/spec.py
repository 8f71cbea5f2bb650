"""``OpSpec``: how to call an op, on which shapes and domain, and its torch counterpart."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import chainrule as cr


@dataclass(frozen=True)
class OpSpec:
    name: str                                   # key in cr.PRIMITIVES
    fn: Callable[..., Any]                      # takes Tensors, returns a Tensor
    shapes: tuple = ((3, 4),)
    domain: tuple = (-2.0, 2.0)                 # keeps log/sqrt/arccosh inside their domain
    order: int = 2                              # highest derivative order checked
    torch_fn: Callable[..., Any] | None = None  # same function on torch tensors (None: no torch check)
    domains: tuple | None = None                # per-input domains, overriding `domain`
    id: str = ""
    # complex specs: one letter per input, "c" complex128 (real part in the domain, imaginary part
    # in `imag`) or "r" float64; "" (the real op table): every input float64
    kinds: str = ""
    imag: tuple = (-1.0, 1.0)

    def __post_init__(self) -> None:
        if self.kinds and (len(self.kinds) != len(self.shapes) or set(self.kinds) - {"c", "r"}):
            raise ValueError(f"OpSpec {self}: kinds {self.kinds!r} needs one 'c' or 'r' per input shape")

    @property
    def complex(self) -> bool:
        return bool(self.kinds)

    def sample(self, rng: np.random.Generator) -> list:
        doms = self.domains or (self.domain,) * len(self.shapes)
        kinds = self.kinds or "r" * len(self.shapes)
        out = []
        for s, (lo, hi), kind in zip(self.shapes, doms, kinds):
            x = rng.uniform(lo, hi, size=s)
            if kind == "c":
                x = x + 1j * rng.uniform(*self.imag, size=s)
            out.append(cr.tensor(x, dtype=cr.complex128 if kind == "c" else cr.float64, requires_grad=True))
        return out

    def __str__(self) -> str:
        return self.id or self.name


def _t(name: str) -> Callable[..., Any]:
    """torch.<name> resolved lazily (torch is optional)."""
    def call(*xs: Any) -> Any:
        import torch
        return getattr(torch, name)(*xs)
    return call


def _tl(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*xs: Any) -> Any:
        import torch
        return fn(torch, *xs)
    return call
