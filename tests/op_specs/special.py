"""Op-table rows of chainrule/ops/special.py (cr.special: SciPy's special functions)."""
from __future__ import annotations

import numpy as np

import chainrule as cr
from tests.op_specs.spec import OpSpec, _tl

S = cr.special
BCAST = ((3, 1), (1, 4))
# constant arguments without a derivative (betainc's a, b; gammainc's a; zeta's x)
_A = np.linspace(0.6, 2.5, 3).reshape(3, 1)
_B = np.linspace(0.7, 3.0, 4)
_ZX = np.linspace(1.5, 3.5, 3).reshape(3, 1)
_N = np.array([[0], [1], [3]])


def _sp(name: str, domain: tuple = (-2.0, 2.0), torch: str | None = None, **kw: object) -> OpSpec:
    """A unary row of cr.special.<name>, checked against torch.special.<torch> (None: <name>; "": none)."""
    tn = name if torch is None else torch
    return OpSpec(name, getattr(S, name), domain=domain,
                  torch_fn=_tl(lambda t, x: getattr(t.special, tn)(x)) if tn else None, **kw)


def _sp2(name: str, domains: tuple, torch_fn: object = None, **kw: object) -> OpSpec:
    return OpSpec(name, getattr(S, name), shapes=BCAST, domains=domains, torch_fn=torch_fn, **kw)


def _flat(fn: object) -> object:
    """torch's softmax over every entry: SciPy's axis=None."""
    return _tl(lambda t, x: fn(t, x.reshape(-1), 0).reshape(x.shape))


SPECS: list = [
    # ----- gamma family -----
    _sp("gammaln", (0.2, 3.0)),
    _sp("gammaln", (-2.9, -2.1), id="gammaln-negative"),
    OpSpec("gamma", S.gamma, domain=(0.2, 3.0), torch_fn=_tl(lambda t, x: t.exp(t.lgamma(x)))),
    OpSpec("gamma", S.gamma, domain=(-1.8, -1.2), id="gamma-negative"),
    OpSpec("loggamma", S.loggamma, domain=(0.3, 3.0), torch_fn=_tl(lambda t, x: t.lgamma(x))),
    _sp("digamma", (0.3, 3.0)),
    OpSpec("digamma", S.psi, domain=(-1.8, -1.2), id="psi-negative", torch_fn=_tl(lambda t, x: t.special.psi(x))),
    OpSpec("polygamma", lambda x: S.polygamma(2, x), domain=(0.3, 3.0),
           torch_fn=_tl(lambda t, x: t.special.polygamma(2, x))),
    OpSpec("polygamma", lambda x: S.polygamma(_N, x), id="polygamma-n-array", domain=(0.3, 3.0)),
    OpSpec("gammaln", lambda a: S.multigammaln(a, 3), id="multigammaln", domain=(1.2, 3.0),
           torch_fn=_tl(lambda t, a: t.special.multigammaln(a, 3))),
    _sp2("beta", ((0.5, 3.0), (0.5, 3.0)),
         torch_fn=_tl(lambda t, a, b: t.exp(t.lgamma(a) + t.lgamma(b) - t.lgamma(a + b)))),
    _sp2("betaln", ((0.5, 3.0), (0.5, 3.0)),
         torch_fn=_tl(lambda t, a, b: t.lgamma(a) + t.lgamma(b) - t.lgamma(a + b))),
    OpSpec("betainc", lambda x: S.betainc(_A, _B, x), domain=(0.1, 0.9)),
    OpSpec("gammainc", lambda x: S.gammainc(_A, x), domain=(0.2, 3.0),
           torch_fn=_tl(lambda t, x: t.special.gammainc(t.tensor(_A), x))),
    OpSpec("gammaincc", lambda x: S.gammaincc(_A, x), domain=(0.2, 3.0),
           torch_fn=_tl(lambda t, x: t.special.gammaincc(t.tensor(_A), x))),
    OpSpec("zeta", lambda q: S.zeta(_ZX, q), domain=(0.5, 2.0),
           torch_fn=_tl(lambda t, q: t.special.zeta(t.tensor(_ZX), q))),
    # ----- error function family (erf's real row is in op_specs.py) -----
    _sp("erfc"), _sp("erfinv", (-0.9, 0.9)),
    OpSpec("erfcinv", S.erfcinv, domain=(0.1, 1.9), torch_fn=_tl(lambda t, x: t.special.erfinv(1 - x))),
    _sp("erfcx"), _sp("ndtr", (-3.0, 3.0)), _sp("ndtri", (0.05, 0.95)), _sp("log_ndtr", (-3.0, 3.0)),
    _sp("log_ndtr", (-30.0, -10.0), id="log_ndtr-far-left"),
    # ----- logistic family -----
    _sp("expit", (-4.0, 4.0)), _sp("logit", (0.05, 0.95)),
    OpSpec("log_expit", S.log_expit, domain=(-4.0, 4.0), torch_fn=_tl(lambda t, x: t.nn.functional.logsigmoid(x))),
    # ----- x log y and entropies -----
    _sp2("xlogy", ((-2.0, 2.0), (0.2, 3.0)), torch_fn=_tl(lambda t, x, y: t.special.xlogy(x, y))),
    _sp2("xlog1py", ((-2.0, 2.0), (-0.8, 2.0)), torch_fn=_tl(lambda t, x, y: t.special.xlog1py(x, y))),
    _sp("entr", (0.1, 3.0)),
    _sp2("rel_entr", ((0.1, 3.0), (0.1, 3.0)), torch_fn=_tl(lambda t, x, y: x * t.log(x / y))),
    _sp2("kl_div", ((0.1, 3.0), (0.1, 3.0)), torch_fn=_tl(lambda t, x, y: x * t.log(x / y) - x + y)),
    # ----- Bessel i0, i1 (and scaled) -----
    _sp("i0", (-3.0, 3.0)), _sp("i0e", (-3.0, 3.0)), _sp("i1", (-3.0, 3.0)), _sp("i1e", (-3.0, 3.0)),
    _sp("sinc", id="special.sinc"), _sp("sinc", (-0.04, 0.04), id="special.sinc-near-zero"),
    # ----- reductions over SciPy's axis argument (composites) -----
    OpSpec("logsumexp", lambda x: S.logsumexp(x, axis=1), id="special.logsumexp",
           torch_fn=_tl(lambda t, x: t.special.logsumexp(x, 1))),
    OpSpec("log", lambda a, b: S.logsumexp(a, axis=1, b=b), id="special.logsumexp-b", shapes=((3, 4), (3, 4)),
           domains=((-2.0, 2.0), (0.2, 2.0)), torch_fn=_tl(lambda t, a, b: t.logsumexp(a + t.log(b), 1))),
    OpSpec("log", lambda a, b: S.logsumexp(a, axis=0, b=-b, return_sign=True)[0], id="special.logsumexp-b-sign",
           shapes=((3, 4), (4,)), domains=((-2.0, 2.0), (0.2, 2.0)),
           torch_fn=_tl(lambda t, a, b: t.logsumexp(a + t.log(b), 0))),
    OpSpec("softmax", S.softmax, id="special.softmax", torch_fn=_flat(lambda t, x, d: t.softmax(x, d))),
    OpSpec("softmax", lambda x: S.softmax(x, axis=0), id="special.softmax-axis",
           torch_fn=_tl(lambda t, x: t.special.softmax(x, 0))),
    OpSpec("logsumexp", lambda x: S.softmax(x, axis=(0, 2)), id="special.softmax-axes", shapes=((2, 3, 4),),
           torch_fn=_tl(lambda t, x: t.exp(x - t.logsumexp(x, (0, 2), keepdim=True)))),
    OpSpec("log_softmax", S.log_softmax, id="special.log_softmax",
           torch_fn=_flat(lambda t, x, d: t.log_softmax(x, d))),
    OpSpec("logsumexp", lambda x: S.log_softmax(x, axis=(0, 1)), id="special.log_softmax-axes",
           torch_fn=_tl(lambda t, x: x - t.logsumexp(x, (0, 1), keepdim=True))),
]

COMPLEX_SPECS: list = [
    OpSpec("erf", cr.erf, kinds="c", domain=(-1.5, 1.5)),
    OpSpec("erfc", S.erfc, kinds="c", domain=(-1.5, 1.5)),
    OpSpec("erfcx", S.erfcx, kinds="c", domain=(-1.5, 1.5)),
    OpSpec("ndtr", S.ndtr, kinds="c", domain=(-1.5, 1.5)),
    OpSpec("log_ndtr", S.log_ndtr, kinds="c", domain=(-1.0, 2.0), imag=(-0.5, 0.5)),
    # second order would need digamma's complex derivative (trigamma of complex z: not in SciPy)
    OpSpec("gamma", S.gamma, kinds="c", domain=(0.5, 3.0), order=1),
    OpSpec("loggamma", S.loggamma, kinds="c", domain=(0.5, 3.0), order=1),
    OpSpec("xlogy", S.xlogy, kinds="cc", shapes=BCAST, domains=((-2.0, 2.0), (0.5, 2.0))),
    OpSpec("xlogy", S.xlogy, kinds="rc", id="xlogy-rc", shapes=BCAST, domains=((-2.0, 2.0), (0.5, 2.0))),
    OpSpec("xlog1py", S.xlog1py, kinds="cc", shapes=BCAST, domains=((-2.0, 2.0), (-0.5, 2.0))),
    OpSpec("sinc", S.sinc, kinds="c", id="special.sinc", torch_fn=_tl(lambda t, x: t.sinc(x))),
]
