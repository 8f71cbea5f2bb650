"""examples/spectral_loss.py: a symmetric matrix fitted to a target spectrum through
``cr.linalg.eigvalsh``, and nuclear-norm matrix completion through ``cr.linalg.norm(X, 'nuc')``
(reaching the optimum that NumPy's singular value thresholding finds); each loss's gradient
matches central differences in both modes and torch's."""
import contextlib
import io
import os
import re
import runpy
import sys

import numpy as np
import pytest

import chainrule as cr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "spectral_loss.py")


def _module():
    return runpy.run_path(EXAMPLE, run_name="spectral_loss")


def _figure(pattern: str, text: str) -> float:
    return float(re.search(pattern, text).group(1))


@pytest.fixture(scope="module")
def output():
    buf, argv = io.StringIO(), sys.argv
    sys.argv = ["spectral_loss.py"]
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(EXAMPLE, run_name="__main__")
    finally:
        sys.argv = argv
    a, b = buf.getvalue().split("(b)")
    return a, b


def test_spectrum_fit_reaches_the_target(output):
    a, _ = output
    first = _figure(r"initial loss ([\d.e+-]+)", a)
    last = _figure(r"final loss\s+([\d.e+-]+)", a)
    err = _figure(r"max eigenvalue error ([\d.e+-]+)", a)
    assert first > 1 and last < 1e-10 * first              # more than 10 orders of magnitude
    assert err < 1e-6


def test_completion_reaches_the_optimum_and_the_rank(output):
    _, b = output
    excess0 = _figure(r"excess loss: initial ([\d.e+-]+)", b)
    excess = _figure(r"excess loss: .*final ([\d.e+-]+)", b)
    assert excess0 > 1 and abs(excess) < 1e-4 * excess0    # within 1e-4 of the optimum's gap
    assert _figure(r"unobserved entries: ([\d.e+-]+)", b) < 0.02
    assert _figure(r"recovered rank (\d+)", b) == 2


def _fit_point(mod, seed=3):
    fit = mod["SpectrumFit"](n=5)
    return fit, np.random.default_rng(seed).standard_normal((5, 5))


def _completion_point(mod, seed=3):
    comp = mod["Completion"](m=6, n=5, rank=2)
    return comp, np.random.default_rng(seed).standard_normal((6, 5))


@pytest.mark.parametrize("which", ["spectrum", "completion"])
def test_loss_gradients_match_central_differences(which):
    mod = _module()
    problem, x0 = (_fit_point if which == "spectrum" else _completion_point)(mod)
    x = cr.tensor(x0, requires_grad=True)
    assert cr.gradcheck(problem.loss, (x,), modes=("rev", "fwd"))


def test_spectrum_loss_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    fit, b0 = _fit_point(_module())
    b = cr.tensor(b0, requires_grad=True)
    loss = fit.loss(b)
    loss.backward()
    bt = torch.tensor(b0, requires_grad=True)
    lt = torch.sum((torch.linalg.eigvalsh(bt + bt.T) - torch.tensor(fit.target)) ** 2)
    lt.backward()
    assert abs(lt.item() - loss.item()) < 1e-12
    np.testing.assert_allclose(b.grad.data, bt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_completion_loss_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    comp, x0 = _completion_point(_module())
    x = cr.tensor(x0, requires_grad=True)
    loss = comp.loss(x)
    loss.backward()
    xt = torch.tensor(x0, requires_grad=True)
    r = torch.tensor(comp.mask) * (xt - torch.tensor(comp.M))
    lt = 0.5 * torch.sum(r * r) + comp.lam * torch.linalg.matrix_norm(xt, "nuc")
    lt.backward()
    assert abs(lt.item() - loss.item()) < 1e-12
    np.testing.assert_allclose(x.grad.data, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
