"""A Student-t log-likelihood, forward + backward in its three parameters, float64:
L(df, loc, scale) = sum_i t.logpdf(x_i; df, loc, scale) over 10^5 observations.

- chainrule: ``cr.stats.t.logpdf(x, df, loc, scale).sum().backward()`` (SciPy's formula as a
  composite of chainrule ops and ``cr.special``; gradients in df through digamma).
- hand-written NumPy + SciPy: the log density by ``scipy.special.gammaln`` and ``log1p``, and the
  three gradients by hand, with z = (x - loc) / scale, w = 1 + z^2 / df:
  dL/dloc = sum (df + 1) z / (scale df w), dL/dscale = sum ((df + 1) z^2 / (df w) - 1) / scale,
  dL/ddf = sum (psi((df + 1) / 2) - psi(df / 2) - 1 / df - log w + (df + 1) z^2 / (df^2 w)) / 2.
- PyTorch eager: ``torch.distributions.StudentT(df, loc, scale).log_prob(x).sum().backward()``.
- HIPS autograd: ``autograd.scipy.stats.t.logpdf`` under ``grad`` in its four arguments.
"""
from __future__ import annotations

import _harness as H
import numpy as np
import scipy.special as sc

import chainrule as cr

N_OBS = 100_000
PARAMS = (4.5, 0.3, 1.7)                          # df, loc, scale at which the gradient is taken


def _data(quick: bool) -> np.ndarray:
    n = 1_000 if quick else N_OBS
    rng = np.random.default_rng(11)
    return 0.2 + 1.5 * rng.standard_t(5.0, size=n)


def _chainrule(quick):
    def setup():
        x = _data(quick)
        ps = [cr.tensor(p, dtype=cr.float64, requires_grad=True) for p in PARAMS]

        def step():
            for p in ps:
                p.grad = None
            loss = cr.stats.t.logpdf(x, *ps).sum()
            loss.backward()
            return [loss] + [p.grad for p in ps]
        return step, step()
    return setup


def _numpy(quick):
    def setup():
        x = _data(quick)
        df, loc, scale = PARAMS
        n = x.size

        def step():
            z = (x - loc) / scale
            z2 = z * z
            lw = np.log1p(z2 / df)
            w = 1.0 + z2 / df
            const = sc.gammaln((df + 1) / 2) - sc.gammaln(df / 2) - 0.5 * np.log(df * np.pi) - np.log(scale)
            loss = n * const - (df + 1) / 2 * lw.sum()
            r = z / w                                        # z / w, shared by the three gradients
            g_loc = (df + 1) / (scale * df) * r.sum()
            s_zr = (z * r).sum()                             # sum z^2 / w
            g_scale = ((df + 1) / df * s_zr - n) / scale
            g_df = 0.5 * (n * (sc.digamma((df + 1) / 2) - sc.digamma(df / 2) - 1.0 / df) - lw.sum()
                          + (df + 1) / df ** 2 * s_zr)
            return [loss, g_df, g_loc, g_scale]
        return step, step()
    return setup


def _torch(quick):
    def factory(torch):
        def setup():
            x = torch.tensor(_data(quick))
            ps = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in PARAMS]

            def step():
                for p in ps:
                    p.grad = None
                loss = torch.distributions.StudentT(*ps).log_prob(x).sum()
                loss.backward()
                return [loss] + [p.grad for p in ps]
            return step, step()
        return setup
    return factory


def _autograd(quick):
    def factory(ag):
        import autograd.numpy as anp
        import autograd.scipy.stats.t as at

        def setup():
            x = _data(quick)

            def loss(ps):
                return anp.sum(at.logpdf(x, ps[0], ps[1], ps[2]))
            vg = ag.value_and_grad(loss)
            ps0 = np.array(PARAMS)

            def step():
                v, g = vg(ps0)
                return [v, g[0], g[1], g[2]]
            return step, step()
        return setup
    return factory


def cases(quick: bool = False) -> list[H.Case]:
    n = 1_000 if quick else N_OBS
    rows = [H.Contender("chainrule", "chainrule", _chainrule(quick)),
            H.Contender("NumPy (hand-written)", "numpy", _numpy(quick))]
    rows += H.peer_rows(_torch(quick), _autograd(quick))
    return [H.Case("stats_t_loglik", f"Student-t log-likelihood of {n:,} observations, float64, "
                   "grad in (df, loc, scale)", rows,
                   targets=[H.Target("t log-likelihood vs PyTorch eager", "chainrule", "PyTorch eager", 1.5)],
                   rtol=1e-9, atol=1e-9, notes=H.skip_note(["torch", "autograd", "jax"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
