"""The helper the utilities share: their ``parameters`` argument as a list of tensors."""
from __future__ import annotations

from typing import Any

from chainrule.core.tensor import Tensor


def tensor_list(parameters: Any, who: str) -> list:
    """``parameters`` (one tensor or an iterable of them, e.g. ``model.parameters()``) as a list; anything
    else raises a TypeError naming ``who``."""
    items = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{who}: expected Tensors (e.g. model.parameters()), but item {i} is "
                            f"{type(t).__name__}")
    return items
