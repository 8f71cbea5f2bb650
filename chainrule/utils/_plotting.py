"""Matplotlib on demand: an optional dependency (``pip install 'chainrule[plot]'``), loaded by the plots only."""
from __future__ import annotations

from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend, or None where matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt
