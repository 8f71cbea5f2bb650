"""(being written)"""
from __future__ import annotations

NAMES: tuple = ()       # public functions, exported as cr.<name>
NUMPY: dict = {}        # {numpy (or scipy.special) function: chainrule function}, for dispatch
