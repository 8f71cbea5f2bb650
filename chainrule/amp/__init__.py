"""Mixed precision: ``autocast`` and ``GradScaler`` (``cr.amp``), the dtype policy and loss-scaling
helpers (``cr.precision``) and FP8 (``cr.fp8``). See docs/precision.md.

>>> import chainrule as cr
>>> cr.amp.op_policy("matmul")
'low'
"""
from chainrule.amp.mixed_precision import GradScaler, NonFiniteGradientError, autocast, op_policy

__all__ = ["GradScaler", "NonFiniteGradientError", "autocast", "op_policy"]
