"""gradcheck: pass on right rules, locate a wrong rule inside a 50-op graph, report kinks; complex
data checked on both parts in both modes, and a rule that forgets a conj caught."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import chainrule as cr

ROOT = Path(__file__).resolve().parents[2]


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
                        (lambda g, out, x: g * (1 - np.asarray(cr.numpy.raw(out)) ** 2),))
    assert cr.gradcheck(lambda x: cr.tanh(x) ** 2, (x,))
    with pytest.raises(cr.GradcheckError):
        cr.gradgradcheck(lambda x: cr.tanh(x) ** 2, (x,))


def test_seed_reverse_mode_example_prints_the_seed_figures():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "seed_reverse_mode.py")],
                         capture_output=True, text=True, check=True).stdout
    assert "loss 0.016675" in out
    assert "dL/dW1[2][1]: reverse mode -0.04870060, finite difference -0.04870060" in out


# ----- complex inputs and outputs: both parts, both modes -----
def _cplx(rng, *shape):
    return cr.tensor(rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape), requires_grad=True)


@pytest.mark.parametrize("fn, n_inputs", [
    (lambda z: z * cr.conj(z), 1),                    # real-valued, not holomorphic
    (cr.abs, 1), (cr.angle, 1),                       # complex in, real out
    (cr.exp, 1), (lambda z: z ** 3 / (z + 3), 1),     # holomorphic
    (lambda z: cr.real(z) * cr.imag(z) + z, 1),
    (cr.matmul, 2),                                   # complex matrices
    (lambda z, w: cr.view_as_real(z @ cr.conj(w).T), 2),
], ids=["z-conj-z", "abs", "angle", "exp", "rational", "real-imag", "matmul", "view_as_real"])
def test_gradcheck_passes_on_complex_functions(fn, n_inputs, rng):
    zs = [_cplx(rng, 3, 3) for _ in range(n_inputs)]
    assert cr.gradcheck(fn, zs, modes=("rev", "fwd"))
    assert cr.gradgradcheck(fn, zs)


def test_gradcheck_mixes_real_and_complex_inputs(rng):
    x = cr.tensor(rng.uniform(-1, 1, (2, 3)), requires_grad=True)
    z = _cplx(rng, 3, 2)
    assert cr.gradcheck(lambda x, z: cr.sin(x @ z) * x.sum(), (x, z), modes=("rev", "fwd"))
    assert cr.gradcheck(lambda x: cr.view_as_complex(x), (cr.tensor(rng.uniform(-1, 1, (3, 2))),))
    # with no input that requires grad, the float and complex inputs are all checked
    assert cr.gradcheck(lambda x, z: cr.abs(x @ z), (x.detach(), z.detach()), modes=("rev", "fwd"))


class _ForgetsConj(cr.Function):
    """z * w with the real-variable formulas: backward g * w (should be g * conj(w)), a jvp t * w
    (right: the JVP is J t)."""

    @staticmethod
    def forward(ctx, z, w):
        ctx.save_for_backward(z, w)
        return z * w

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        return g * w, g * z

    @staticmethod
    def jvp(ctx, tz, tw):
        z, w = ctx.saved_tensors
        return tz * w + tw * z


def test_gradcheck_catches_a_complex_backward_that_forgets_the_conj(rng):
    z, w = _cplx(rng, 4), _cplx(rng, 4)
    with pytest.raises(cr.GradcheckError) as info:
        cr.gradcheck(_ForgetsConj.apply, (z, w))
    msg = str(info.value)
    assert msg.startswith("gradcheck (reverse mode): Jacobian mismatch for input 0 element (")
    assert "(imaginary part)" in msg and "analytic" in msg and "numerical" in msg
    assert "conjugate of the numerical one" in msg and "J^H v" in msg
    assert cr.gradcheck(_ForgetsConj.apply, (z, w), raise_exception=False) is False
    assert cr.gradcheck(_ForgetsConj.apply, (z, w), modes=("fwd",))        # its jvp is right
    # with real data the same Function is right: the failure is the complex convention's
    x, y = (cr.tensor(rng.uniform(-1, 1, 4), requires_grad=True) for _ in range(2))
    assert cr.gradcheck(_ForgetsConj.apply, (x, y), modes=("rev", "fwd"))


def test_gradcheck_catches_a_wrong_complex_jvp(rng):
    class ConjWrongJvp(cr.Function):            # conj(z): its JVP is conj(t), not t
        @staticmethod
        def forward(ctx, z):
            return cr.conj(z)

        @staticmethod
        def backward(ctx, g):
            return cr.conj(g)

        @staticmethod
        def jvp(ctx, t):
            return t

    z = _cplx(rng, 3)
    assert cr.gradcheck(ConjWrongJvp.apply, (z,))
    with pytest.raises(cr.GradcheckError, match=r"forward mode.*\(imaginary part\)"):
        cr.gradcheck(ConjWrongJvp.apply, (z,), modes=("fwd",))


def test_gradcheck_names_the_wrong_complex_rule(rng, monkeypatch):
    """exp's complex VJP without its conj (the analytic rule as written) inside a composite with
    abs of complex data: named as the first wrong rule (abs's smooth sign z/|z| is no kink)."""
    z = _cplx(rng, 3)
    fn = lambda z: cr.exp(z * 0.5) * cr.abs(z) + z   # noqa: E731
    assert cr.gradcheck(fn, (z,), modes=("rev", "fwd"))
    monkeypatch.setattr(cr.PRIMITIVES["exp"], "on_complex", cr.PRIMITIVES["exp"])
    with pytest.raises(cr.GradcheckError) as info:
        cr.gradcheck(fn, (z,))
    assert "first wrong rule: op #1 'exp' (reverse mode), input 0 element" in str(info.value)
    assert cr.gradcheck(fn, (z,), modes=("fwd",))                    # the JVP is untouched


def test_gradgradcheck_catches_a_wrong_complex_second_derivative(rng, monkeypatch):
    z = _cplx(rng, 3)
    fn = lambda z: cr.abs(z) ** 3   # noqa: E731
    assert cr.gradgradcheck(fn, (z,))
    # abs's complex rule g * z / |z| with z / |z| computed outside the graph: right to first order only
    monkeypatch.setattr(cr.PRIMITIVES["abs"], "vjps",
                        (lambda g, out, x: g * (lambda a: a / np.abs(a))(np.asarray(cr.numpy.raw(x))),))
    assert cr.gradcheck(fn, (z,))
    with pytest.raises(cr.GradcheckError, match="Jacobian mismatch for input 0 element"):
        cr.gradgradcheck(fn, (z,))
