"""Op-table rows of chainrule/ops/numpy_math.py (being written)."""
from __future__ import annotations

SPECS: list = []
COMPLEX_SPECS: list = []
