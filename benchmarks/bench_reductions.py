"""A statistics loss on 10^5 float64 values: median, 0.9-quantile, a covariance, squared differences
(``np.diff``) and a convolution with a 33-tap kernel, forward + backward (gradients in x and the
kernel), side by side with hand-written NumPy (gradients by hand) and PyTorch.

    L = median(x) + quantile(x, 0.9) + cov(x.reshape(2, -1))[0, 1] + mean(diff(x)^2)
        + mean(convolve(x, k, "valid")^2)
"""
from __future__ import annotations

import _harness as H
import numpy as np

import chainrule as cr

N, TAPS = 100_000, 33


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=n), rng.normal(size=TAPS) / TAPS


def loss_chainrule(x, k):
    d = x[1:] - x[:-1]                                   # np.diff
    c = cr.convolve(x, k, "valid")
    return (cr.median(x) + cr.quantile(x, 0.9) + cr.cov(cr.reshape(x, (2, -1)))[0, 1]
            + cr.mean(d * d) + cr.mean(c * c))


def _chainrule(n: int):
    def setup():
        x0, k0 = _inputs(n)
        x, k = cr.tensor(x0, requires_grad=True), cr.tensor(k0, requires_grad=True)

        def step():
            x.grad = k.grad = None
            loss_chainrule(x, k).backward()
            return x.grad, k.grad
        return step, step()
    return setup


def _numpy(n: int):
    def setup():
        x, k = _inputs(n)

        def step():
            gx = np.zeros_like(x)
            # median: the two middle order statistics, 1/2 each
            lo, hi = (n - 1) // 2, n // 2
            idx = np.argpartition(x, [lo, hi])
            i_lo, i_hi = idx[lo], idx[hi]
            med = (x[i_lo] + x[i_hi]) / 2
            gx[i_lo] += 0.5
            gx[i_hi] += 0.5
            # 0.9-quantile, linear interpolation between ranks j and j + 1
            v = (n - 1) * 0.9
            j = int(np.floor(v))
            t = v - j
            idx = np.argpartition(x, [j, j + 1])
            a, b = x[idx[j]], x[idx[j + 1]]
            q = a + (b - a) * t
            gx[idx[j]] += 1 - t
            gx[idx[j + 1]] += t
            # cov(y)[0, 1] of y = x.reshape(2, -1): d/dy0 = (y1 - mean y1) / (m - 1) and vice versa
            y = x.reshape(2, -1)
            m = y.shape[1]
            yc = y - y.mean(axis=1, keepdims=True)
            c01 = yc[0] @ yc[1] / (m - 1)
            gy = gx.reshape(2, -1)
            gy[0] += yc[1] / (m - 1)
            gy[1] += yc[0] / (m - 1)
            # mean of squared differences
            d = x[1:] - x[:-1]
            gd = 2 * d / d.size
            gx[1:] += gd
            gx[:-1] -= gd
            # mean of the squared valid convolution
            c = np.convolve(x, k, "valid")
            gc = 2 * c / c.size
            gx += np.correlate(gc, k, "full")
            gk = np.correlate(x, gc, "valid")[::-1]
            loss = med + q + c01 + d @ d / d.size + c @ c / c.size
            return gx, gk, loss
        out = step()
        return step, out[:2]
    return setup


def _torch(n: int):
    def factory(torch):
        def setup():
            x0, k0 = _inputs(n)
            x = torch.tensor(x0, requires_grad=True)
            k = torch.tensor(k0, requires_grad=True)
            conv1d = torch.nn.functional.conv1d

            def step():
                x.grad = k.grad = None
                d = torch.diff(x)
                c = conv1d(x[None, None], k.flip(0)[None, None])[0, 0]
                loss = (torch.quantile(x, 0.5) + torch.quantile(x, 0.9) + torch.cov(x.reshape(2, -1))[0, 1]
                        + (d * d).mean() + (c * c).mean())
                loss.backward()
                return x.grad, k.grad
            return step, step()
        return setup
    return factory


def cases(quick: bool = False) -> list[H.Case]:
    n = 10_000 if quick else N
    rows = [H.Contender("chainrule", "chainrule", _chainrule(n)),
            H.Contender("NumPy (hand-written)", "numpy", _numpy(n))]
    torch = H.peer("torch")
    if torch is not None:
        rows.append(H.Contender("PyTorch eager", "torch", _torch(n)(torch)))
    return [H.Case("reductions", f"median + quantile + cov + diff + convolve(33 taps) on {n:,} float64, fwd+bwd",
                   rows, targets=[H.Target("statistics loss vs hand-written NumPy", "chainrule",
                                           "NumPy (hand-written)", 1.5)],
                   rtol=1e-8, atol=1e-12, notes=H.skip_note(["torch"]))]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
