"""Spectral losses, forward + backward, float64: one through ``linalg.eigh`` (eigenvalues and
eigenvectors) and one through ``fft.rfft``.

- ``eigh``: A symmetric 64 x 64 (the leaf), w, V = eigh(A), loss = sum(w^2) + sum(P * V^2) with a
  fixed weight matrix P (V^2 is the sign-free weight of eigenvector i on coordinate k, so the loss
  is gauge-invariant). The hand-written NumPy row writes the symmetric gradient (PyTorch's, and
  chainrule's): gw = 2 w, gV = 2 P V, K = skew(V^T gV) / (w_j - w_i) off the diagonal, diag(K) = gw,
  A.grad = V K V^T. HIPS autograd's ``eigh`` returns the gradient on the lower triangle it reads
  (off-diagonal entries doubled), so its row is symmetrised once: (G + G^T) / 2.
- ``rfft``: a batch of 16 signals of 4096 samples (the leaf x), Hann window h, Y = rfft(x * h),
  loss = sum(c * |Y|^2) with fixed weights c per frequency. The hand-written NumPy row: the
  cotangent of Y is 2 c Y (dL/dRe + i dL/dIm), rfft's adjoint is n * irfft with the interior
  terms halved (irfft counts them twice, by Hermitian symmetry), then times the window.

The targets compare with PyTorch eager, not with the hand-written rows: those fuse each backward
into a few NumPy calls (the rfft one into a single irfft, with no complex |Y| and no full-length
complex transform), which no eager autodiff library does (PyTorch measures about 1.4x and 3x them).
"""
from __future__ import annotations

import _harness as H
import numpy as np

import chainrule as cr

N_EIG = 64
BATCH, N_FFT = 16, 4096


# ----- eigh -----
def _eig_data(quick: bool):
    n = 16 if quick else N_EIG
    rng = np.random.default_rng(7)
    b = rng.standard_normal((n, n))
    return (b + b.T) / np.sqrt(2 * n), rng.random((n, n))


def _eig_chainrule(quick):
    def setup():
        a0, p0 = _eig_data(quick)
        a, p = cr.tensor(a0, requires_grad=True), cr.tensor(p0)

        def step():
            a.grad = None
            w, v = cr.linalg.eigh(a)
            (cr.sum(w * w) + cr.sum(p * v * v)).backward()
            return a.grad
        return step, step()
    return setup


def _eig_numpy(quick):
    def setup():
        a, p = _eig_data(quick)
        eye = np.eye(a.shape[0], dtype=bool)

        def step():
            w, v = np.linalg.eigh(a)
            vtg = v.T @ (2 * p * v)                       # V^T gV
            e = w[None, :] - w[:, None]                   # w_j - w_i
            e[eye] = 1.0
            k = (vtg - vtg.T) / (2 * e)                   # skew(V^T gV) / (w_j - w_i)
            k[eye] = 2 * w                                # gw on the diagonal
            return v @ k @ v.T
        return step, step()
    return setup


def _eig_torch(quick):
    def factory(torch):
        def setup():
            a0, p0 = _eig_data(quick)
            a, p = torch.tensor(a0, requires_grad=True), torch.tensor(p0)

            def step():
                a.grad = None
                w, v = torch.linalg.eigh(a)
                (torch.sum(w * w) + torch.sum(p * v * v)).backward()
                return a.grad
            return step, step()
        return setup
    return factory


def _eig_autograd(quick):
    def factory(ag):
        import autograd.numpy as anp

        def setup():
            a, p = _eig_data(quick)

            def loss(a):
                w, v = anp.linalg.eigh(a)
                return anp.sum(w * w) + anp.sum(p * v * v)
            g = ag.grad(loss)

            def step():
                t = g(a)                                  # the lower-triangle gradient
                return (t + t.T) / 2
            return step, step()
        return setup
    return factory


# ----- rfft -----
def _fft_data(quick: bool):
    batch, n = (4, 256) if quick else (BATCH, N_FFT)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((batch, n))
    window = np.hanning(n)
    weights = 1.0 + np.linspace(0.0, 1.0, n // 2 + 1) ** 2          # a high-frequency emphasis
    return x, window, weights


def _fft_chainrule(quick):
    def setup():
        x0, h0, c0 = _fft_data(quick)
        x, h, c = cr.tensor(x0, requires_grad=True), cr.tensor(h0), cr.tensor(c0)

        def step():
            x.grad = None
            cr.sum(c * cr.abs(cr.fft.rfft(x * h)) ** 2).backward()
            return x.grad
        return step, step()
    return setup


def _fft_numpy(quick):
    def setup():
        x, h, c = _fft_data(quick)
        n = x.shape[-1]
        half = np.full(n // 2 + 1, 0.5 * n)               # rfft's adjoint: n * irfft, interior halved
        half[0] = half[-1] = n

        def step():
            y = np.fft.rfft(x * h)
            g = (2 * c * half) * y                        # dL/dY (PyTorch's convention), scaled
            return np.fft.irfft(g, n=n) * h
        return step, step()
    return setup


def _fft_torch(quick):
    def factory(torch):
        def setup():
            x0, h0, c0 = _fft_data(quick)
            x, h, c = torch.tensor(x0, requires_grad=True), torch.tensor(h0), torch.tensor(c0)

            def step():
                x.grad = None
                torch.sum(c * torch.abs(torch.fft.rfft(x * h)) ** 2).backward()
                return x.grad
            return step, step()
        return setup
    return factory


def _fft_autograd(quick):
    def factory(ag):
        import autograd.numpy as anp

        def setup():
            x, h, c = _fft_data(quick)
            g = ag.grad(lambda x: anp.sum(c * anp.abs(anp.fft.rfft(x * h)) ** 2))

            def step():
                return g(x)
            return step, step()
        return setup
    return factory


def cases(quick: bool = False) -> list[H.Case]:
    n = 16 if quick else N_EIG
    batch, m = (4, 256) if quick else (BATCH, N_FFT)
    notes = H.skip_note(["torch", "autograd", "jax"])
    eig = [H.Contender("chainrule", "chainrule", _eig_chainrule(quick)),
           H.Contender("NumPy (hand-written)", "numpy", _eig_numpy(quick))]
    eig += H.peer_rows(_eig_torch(quick), _eig_autograd(quick))
    fft = [H.Contender("chainrule", "chainrule", _fft_chainrule(quick)),
           H.Contender("NumPy (hand-written)", "numpy", _fft_numpy(quick))]
    fft += H.peer_rows(_fft_torch(quick), _fft_autograd(quick))
    return [
        H.Case("linalg_eigh", f"eigh of a symmetric {n}x{n}, float64, sum(w^2) + sum(P V^2), fwd+bwd",
               eig, targets=[H.Target("eigh loss vs PyTorch eager", "chainrule", "PyTorch eager", 1.5)],
               rtol=1e-7, atol=1e-9, notes=notes),
        H.Case("linalg_rfft", f"rfft of {batch} x {m} windowed signals, float64, sum(c |Y|^2), fwd+bwd",
               fft, targets=[H.Target("rfft loss vs PyTorch eager", "chainrule", "PyTorch eager", 1.5)],
               rtol=1e-9, atol=1e-9, notes=notes),
    ]


if __name__ == "__main__":
    raise SystemExit(H.main(cases))
