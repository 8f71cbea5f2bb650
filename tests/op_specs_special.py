"""Op-table rows of chainrule/ops/special.py (being written)."""
from __future__ import annotations

SPECS: list = []
COMPLEX_SPECS: list = []
