"""examples/lotka_volterra.py: L-BFGS-B with the adjoint gradient of cr.integrate.odeint recovers the
four Lotka–Volterra parameters from noisy observations (fixed seed)."""
import os
import re
import runpy

import numpy as np

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
