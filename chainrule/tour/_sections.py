"""The tour's section registry: each section module registers its sections with ``@section``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class Section:
    key: str
    title: str
    seed: str                      # the seed idea it shows
    run: Callable[["Context"], None]


@dataclass
class Context:
    fast: bool = False             # smaller sizes (used by the test suite)
    out: str | None = None         # directory for PNG plots (needs matplotlib)

    @property
    def rounds(self) -> int:
        """Interleaved rounds behind every printed time (``chainrule.timing``)."""
        return 5 if self.fast else 7

    def say(self, text: str = "") -> None:
        print(text, flush=True)


SECTIONS: list[Section] = []


def section(key: str, title: str, seed: str) -> Callable:
    """Register a tour section (in the order modules are imported)."""
    def register(fn: Callable[[Context], None]) -> Callable[[Context], None]:
        SECTIONS.append(Section(key, title, seed, fn))
        return fn
    return register
