"""``cr.special``: SciPy's ``scipy.special``, differentiable (gamma and beta families, error
functions, Bessel ``i0``/``i1``, ``logsumexp``, ``xlogy``, ...); the functions and rules live in
``chainrule.ops.special``.

>>> import chainrule as cr
>>> round(cr.special.gammaln(cr.tensor(5.0)).item(), 6)
3.178054
"""
from chainrule.ops.special import (
    beta,
    betainc,
    betaln,
    digamma,
    entr,
    erf,
    erfc,
    erfcinv,
    erfcx,
    erfinv,
    expit,
    gamma,
    gammainc,
    gammaincc,
    gammaln,
    i0,
    i0e,
    i1,
    i1e,
    kl_div,
    log_expit,
    log_ndtr,
    log_softmax,
    loggamma,
    logit,
    logsumexp,
    multigammaln,
    ndtr,
    ndtri,
    polygamma,
    psi,
    rel_entr,
    sinc,
    softmax,
    xlog1py,
    xlogy,
    zeta,
)

__all__ = ["gammaln", "gamma", "loggamma", "digamma", "psi", "polygamma", "multigammaln", "beta", "betaln",
           "betainc", "erf", "erfc", "erfinv", "erfcinv", "erfcx", "ndtr", "ndtri", "log_ndtr", "expit", "logit",
           "log_expit", "xlogy", "xlog1py", "entr", "rel_entr", "kl_div", "logsumexp", "softmax", "log_softmax",
           "i0", "i0e", "i1", "i1e", "sinc", "zeta", "gammainc", "gammaincc"]
