"""examples/lotka_volterra.py: L-BFGS-B with the adjoint gradient of cr.integrate.odeint recovers the
four Lotka–Volterra parameters from noisy observations (fixed seed)."""
import os
import re
import runpy

import numpy as np

import chainrule as cr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "lotka_volterra.py")


def test_example_recovers_the_parameters(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["lotka_volterra.py"])
    runpy.run_path(EXAMPLE, run_name="__main__")
    out = capsys.readouterr().out
    first = float(re.search(r"initial loss ([\d.e+-]+)", out).group(1))
    last = float(re.search(r"final loss\s+([\d.e+-]+)", out).group(1))
    assert last < 0.01 * first and last < 5e-3            # the noise floor is 0.05² = 2.5e-3
    rows = {m.group(1): [float(v) for v in m.groups()[1:]]
            for m in re.finditer(r"^(alpha|beta|delta|gamma)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out, re.M)}
    assert set(rows) == {"alpha", "beta", "delta", "gamma"}
    true, start, found = (np.array([rows[k][i] for k in ("alpha", "beta", "delta", "gamma")]) for i in range(3))
    np.testing.assert_allclose(true, [1.0, 0.1, 0.075, 1.5])
    assert np.all(np.abs(found - true) / true < 0.06)       # recovered within 6% (start was 20% off)
    assert np.all(np.abs(start - true) / true > 0.15)
    assert float(re.search(r"max relative error ([\d.]+)", out).group(1)) < 0.06


def test_the_example_gradient_matches_forward_mode_and_differences():
    """The loss the example minimises (rtol = atol = 1e-6): the adjoint gradient against the forward
    sensitivities (cr.jacfwd) and central differences, at the start and at the true parameters."""
    ex = runpy.run_path(EXAMPLE, run_name="lotka_volterra")
    data = ex["observations"]()
    loss = ex["loss"]
    for p in (np.array([0.8, 0.12, 0.06, 1.2]), ex["TRUE"]):
        x = np.log(p)
        rev, fwd = cr.grad(loss)(x, data), cr.jacfwd(loss)(x, data)
        h = 1e-3
        fd = np.array([(loss(x + h * e, data).item() - loss(x - h * e, data).item()) / (2 * h) for e in np.eye(4)])
        scale = np.abs(fwd).max()
        np.testing.assert_allclose(rev, fwd, rtol=2e-5, atol=1e-4 * scale)
        np.testing.assert_allclose(rev, fd, rtol=1e-4, atol=5e-4 * scale)
