"""examples/scipy_minimize.py: scipy.optimize.minimize driven by cr.value_and_grad (L-BFGS-B, jac=True)
and cr.hvp (Newton-CG, hessp=) reaches the same minimum; the wrappers' derivatives are exact."""
import os
import re
import runpy

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "scipy_minimize.py")


def test_both_methods_agree(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["scipy_minimize.py"])
    runpy.run_path(EXAMPLE, run_name="__main__")
    out = capsys.readouterr().out
    rows = {m.group(1): (int(m.group(2)), float(m.group(3)), float(m.group(4)), m.group(5))
            for m in re.finditer(r"^(L-BFGS-B|Newton-CG)\s+iterations\s+(\d+)\s+loss ([\d.]+)\s+\|grad\| "
                                 r"([\d.e+-]+)\s+success (\w+)", out, re.M)}
    assert set(rows) == {"L-BFGS-B", "Newton-CG"}
    (it_l, loss_l, g_l, ok_l), (it_n, loss_n, g_n, ok_n) = rows["L-BFGS-B"], rows["Newton-CG"]
    assert ok_l == ok_n == "True"
    assert abs(loss_l - loss_n) < 1e-11 and g_l < 1e-6 and g_n < 1e-6
    assert it_n < it_l                                     # second-order information pays
    assert float(re.search(r"max \|x_L-BFGS-B - x_Newton-CG\| ([\d.e+-]+)", out).group(1)) < 1e-5
    assert float(re.search(r"training accuracy ([\d.]+)", out).group(1)) > 0.8


def test_gradient_and_hvp_are_exact():
    mod = runpy.run_path(EXAMPLE, run_name="scipy_minimize")
    import chainrule as cr
    X, y = mod["data"]()
    loss, l2 = mod["make_loss"](X, y), 1e-2
    w = np.random.default_rng(3).standard_normal(X.shape[1]) * 0.3
    v = np.random.default_rng(4).standard_normal(X.shape[1])
    value, g = cr.value_and_grad(loss)(w)
    p = 1 / (1 + np.exp(-X @ w))
    np.testing.assert_allclose(value, np.mean(np.logaddexp(0, X @ w) - y * (X @ w)) + 0.5 * l2 * w @ w, rtol=1e-13)
    np.testing.assert_allclose(g, X.T @ (p - y) / len(y) + l2 * w, rtol=1e-12, atol=1e-14)
    hv = cr.hvp(loss, (w,), (v,))[0]
    np.testing.assert_allclose(hv, X.T @ (p * (1 - p) * (X @ v)) / len(y) + l2 * v, rtol=1e-12, atol=1e-14)
    assert isinstance(hv, np.ndarray) and isinstance(g, np.ndarray)
