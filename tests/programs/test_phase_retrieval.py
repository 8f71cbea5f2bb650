"""examples/phase_retrieval.py: gradient descent on complex parameters recovers the signal from its
DFT magnitudes, and its gradient (PyTorch's convention, z.grad = dL/dRe z + i dL/dIm z) is the one
on the real pairs, is the same through cr.fft.fft and through the DFT matrix, and matches torch's."""
import os
import re
import runpy

import numpy as np
import pytest

import chainrule as cr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "phase_retrieval.py")


def _module():
    return runpy.run_path(EXAMPLE, run_name="phase_retrieval")


def test_example_recovers_the_signal(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["phase_retrieval.py"])
    runpy.run_path(EXAMPLE, run_name="__main__")
    out = capsys.readouterr().out
    first = float(re.search(r"initial loss ([\d.e+-]+)", out).group(1))
    last = float(re.search(r"final loss\s+([\d.e+-]+)", out).group(1))
    err = float(re.search(r"relative error .*: ([\d.e+-]+)", out).group(1))
    assert first > 1 and last < 1e-8 * first          # the loss falls by more than 8 orders
    assert err < 1e-5


def test_example_with_the_dft_matrix(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["phase_retrieval.py", "--dft-matrix", "--steps", "150"])
    runpy.run_path(EXAMPLE, run_name="__main__")
    out = capsys.readouterr().out
    assert "F @ frame" in out
    first = float(re.search(r"initial loss ([\d.e+-]+)", out).group(1))
    last = float(re.search(r"final loss\s+([\d.e+-]+)", out).group(1))
    assert last < 1e-4 * first


def _random_point(problem, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(problem.n) + 1j * rng.standard_normal(problem.n)) / 2


@pytest.mark.parametrize("dft_matrix", [False, True], ids=["fft", "dft-matrix"])
def test_gradient_is_the_real_pair_gradient(dft_matrix):
    """z.grad = dL/dx + i dL/dy, the gradient of the same loss written on (x, y) = view_as_real."""
    problem = _module()["Problem"](n=8, dft_matrix=dft_matrix)
    z0 = _random_point(problem)
    z = cr.tensor(z0, requires_grad=True)
    problem.loss(z).backward()
    pair = cr.tensor(np.stack([z0.real, z0.imag], axis=-1), requires_grad=True)
    problem.loss(cr.view_as_complex(pair)).backward()
    np.testing.assert_allclose(z.grad.data.real, pair.grad.data[:, 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(z.grad.data.imag, pair.grad.data[:, 1], rtol=1e-10, atol=1e-12)
    # and a central difference along a random complex direction: dL = Re(<z.grad, dz>)
    d = _random_point(problem, seed=2)
    h = 1e-6
    plus, minus = (problem.loss(cr.tensor(z0 + s * h * d)).item() for s in (1, -1))
    np.testing.assert_allclose((plus - minus) / (2 * h), np.real(np.vdot(z.grad.data, d)), rtol=1e-6)


def test_fft_and_dft_matrix_agree():
    mod = _module()
    z0 = _random_point(mod["Problem"](n=8))
    grads = []
    for dft_matrix in (False, True):
        problem = mod["Problem"](n=8, dft_matrix=dft_matrix)
        z = cr.tensor(z0, requires_grad=True)
        problem.loss(z).backward()
        grads.append(z.grad.data)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dft_matrix", [False, True], ids=["fft", "dft-matrix"])
def test_gradient_matches_torch(dft_matrix):
    torch = pytest.importorskip("torch")
    problem = _module()["Problem"](n=8, dft_matrix=dft_matrix)
    z0 = _random_point(problem)
    z = cr.tensor(z0, requires_grad=True)
    problem.loss(z).backward()
    F, ref, m = (torch.tensor(a) for a in (problem.F.data, problem.reference, problem.magnitudes.data))
    zt = torch.tensor(z0, requires_grad=True)
    frame = torch.cat([ref, zt])
    spectrum = F @ frame if dft_matrix else torch.fft.fft(frame, n=problem.m)
    loss = torch.mean((torch.abs(spectrum) - m) ** 2)
    loss.backward()
    assert abs(loss.item() - problem.loss(cr.tensor(z0)).item()) < 1e-12
    np.testing.assert_allclose(z.grad.data, zt.grad.numpy(), rtol=1e-10, atol=1e-12)
