"""(being written) ``cr.integrate``: SciPy's ``odeint``, differentiable by the adjoint method."""
from __future__ import annotations
