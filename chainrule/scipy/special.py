"""``cr.special``: SciPy's ``scipy.special``, differentiable (gamma and beta families, error
functions, Bessel ``i0``/``i1``, ``logsumexp``, ``xlogy``, ...); the functions and rules live in
``chainrule.ops.special``.

>>> import chainrule as cr
>>> round(cr.special.gammaln(cr.tensor(5.0)).item(), 6)
3.178054
"""
from chainrule.ops import special as _special
from chainrule.ops.special import *  # noqa: F403  (the functions live beside their rules)

__all__ = _special.__all__
