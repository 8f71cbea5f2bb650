"""gradcheck: pass on right rules, locate a wrong rule inside a 50-op graph, report kinks."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import chainrule as cr

ROOT = Path(__file__).resolve().parent.parent


def fifty_ops(x, w):
    h = x
    for _ in range(10):                         # 5 ops per round: 50 recorded ops
        h = cr.tanh(h @ w) * 0.9 + cr.sin(h) - h * 0.1
    return h.sum(axis=0)


def test_gradcheck_passes_and_reports_elements(rng):
    x = cr.tensor(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
    w = cr.tensor(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
    assert cr.gradcheck(fifty_ops, (x, w), modes=("rev", "fwd"))


def test_gradcheck_names_the_first_wrong_rule_in_a_50_op_graph(rng, monkeypatch):
    x = cr.tensor(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
    w = cr.tensor(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
    sin = cr.PRIMITIVES["sin"]
    monkeypatch.setattr(sin, "vjps", (lambda g, out, x: g * cr.cos(x) * 1.01,))   # 1% wrong
    with pytest.raises(cr.GradcheckError) as info:
        cr.gradcheck(fifty_ops, (x, w))
    msg = str(info.value)
    assert "Jacobian mismatch for input" in msg and "analytic" in msg and "numerical" in msg
    assert "first wrong rule: op #3 'sin' (reverse mode), input 0 element" in msg
    assert cr.gradcheck(fifty_ops, (x, w), modes=("fwd",))     # the JVP of sin is still right


def test_gradcheck_returns_false_without_raising(rng, monkeypatch):
    monkeypatch.setattr(cr.PRIMITIVES["exp"], "jvps", (lambda t, out, x: t * out * 2,))
    x = cr.tensor(rng.uniform(-1, 1, (4,)), requires_grad=True)
    assert cr.gradcheck(cr.exp, (x,), modes=("fwd",), raise_exception=False) is False


@pytest.mark.parametrize("fn, point", [
    (lambda x: cr.where(x > 0, x * x, -x), [0.5, 1e-9, -0.3]),
    (lambda x: x[cr.argmax(x)] * 2, [0.5, 0.5 + 1e-9, -0.3]),
    (lambda x: cr.relu(x) * 3, [0.5, 0.0, -0.3]),
    (lambda x: cr.clip(x, -1.0, 0.5), [0.5, 0.7, -0.3]),
])
def test_kinks_are_reported_as_non_differentiable_points(fn, point):
    x = cr.tensor(np.array(point), requires_grad=True)
    with pytest.raises(cr.NonDifferentiablePointError, match="non-differentiable point"):
        cr.gradcheck(fn, (x,))


def test_gradgradcheck_catches_a_wrong_second_derivative(rng, monkeypatch):
    x = cr.tensor(rng.uniform(-1, 1, (3,)), requires_grad=True)
    assert cr.gradgradcheck(lambda x: cr.tanh(x) ** 2, (x,))
    # tanh's rule reads `out`; a rule that ignores out's dependence on x is right only to first order
    monkeypatch.setattr(cr.PRIMITIVES["tanh"], "vjps",
                        (lambda g, out, x: g * (1 - np.asarray(cr.ops.raw(out)) ** 2),))
    assert cr.gradcheck(lambda x: cr.tanh(x) ** 2, (x,))
    with pytest.raises(cr.GradcheckError):
        cr.gradgradcheck(lambda x: cr.tanh(x) ** 2, (x,))


def test_seed_reverse_mode_example_prints_the_seed_figures():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "seed_reverse_mode.py")],
                         capture_output=True, text=True, check=True).stdout
    assert "loss 0.016675" in out
    assert "dL/dW1[2][1]: reverse mode -0.04870060, finite difference -0.04870060" in out
