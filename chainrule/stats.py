"""(being written) ``cr.stats``: SciPy's distributions, differentiable."""
from __future__ import annotations
