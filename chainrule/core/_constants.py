"""Arrays that library code makes from shapes alone (a causal mask): made once per key, read-only,
and known by identity, so ``cr.compile`` may bake them into a tape as constants."""
from __future__ import annotations

from typing import Any, Callable

_CACHE: dict = {}                # key -> the array
IDS: set = set()                 # id() of every array in the cache
_LIMIT = 64


def shape_constant(key: tuple, make: Callable[[], Any]) -> Any:
    """The read-only array ``make()`` for ``key`` (a tuple of shapes, dtypes, flags), made once.

    >>> import numpy as np
    >>> from chainrule.core._constants import shape_constant
    >>> a = shape_constant(("ones", 3), lambda: np.ones(3))
    >>> a is shape_constant(("ones", 3), lambda: np.ones(3)), a.flags.writeable
    (True, False)
    """
    arr = _CACHE.get(key)
    if arr is None:
        if len(_CACHE) >= _LIMIT:                        # drop the oldest
            IDS.discard(id(_CACHE.pop(next(iter(_CACHE)))))
        arr = make()
        arr.flags.writeable = False
        _CACHE[key] = arr
        IDS.add(id(arr))
    return arr
