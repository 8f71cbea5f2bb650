"""The op table on complex data: every complex-capable primitive (``PRIMITIVES[name].complex`` not
None) in complex128, with PyTorch's convention: for a real loss L of z = x + iy, z.grad is
dL/dx + i dL/dy, a VJP is J^H v and a JVP is J t (the R-linear directional derivative).

Each COMPLEX_SPECS row is checked against central differences that perturb the real and imaginary
parts separately (reverse and forward mode, and the first-order gradient for second order), for the
duality Re<v, J t> = Re<J^H v, t> without differences, and against PyTorch where installed. The
primitives without a complex derivative must refuse one with a clear DTypeError.
"""
import numpy as np
import pytest

import chainrule as cr
from chainrule.autograd.forward import dual_level, make_dual, unpack_dual
from chainrule.core.grad_mode import add_to, remove_from
from tests.op_specs import COMPLEX_SPECS, OP_SPECS

H = 1e-6                     # central-difference step, on the real and the imaginary part
RTOL, ATOL = 1e-6, 1e-7      # differences in complex128: error ~ H^2 f''' + 1e-16 |f| / H
SPECS = pytest.mark.parametrize("spec", COMPLEX_SPECS, ids=str)


def _like(a, rng):
    """A random array of ``a``'s shape: complex (standard normal parts) if ``a`` is complex."""
    a = np.asarray(a)
    v = rng.standard_normal(a.shape)
    return v + 1j * rng.standard_normal(a.shape) if a.dtype.kind == "c" else v


def _inner(a, b):
    """Re<a, b> = Re(sum(conj(a) b)), the real inner product of C^n as R^2n."""
    return float(np.real(np.sum(np.conj(a) * b)))


def _value(spec, datas):
    with cr.no_grad():
        return np.asarray(spec.fn(*[cr.tensor(d) for d in datas]).data)


def _fd_gradient(loss, datas, i):
    """dL/dx + i dL/dy for input i (dL/dx for a real one), by central differences."""
    x = datas[i]
    grad = np.zeros(x.shape, x.dtype)
    steps = (1.0, 1j) if x.dtype.kind == "c" else (1.0,)
    for j in np.ndindex(x.shape):
        for s in steps:
            up, down = [d.copy() for d in datas], [d.copy() for d in datas]
            up[i][j] += s * H
            down[i][j] -= s * H
            grad[j] += s * (loss(up) - loss(down)) / (2 * H)
    return grad


def _grads(out, xs, v, create_graph=False):
    """J^H v for each input (zeros where it is unused)."""
    gs = cr.autograd.grad(out, xs, grad_outputs=cr.tensor(v), allow_unused=True, create_graph=create_graph)
    return [cr.zeros_like(x) if g is None else g for x, g in zip(xs, gs)]


def _check_dtypes(spec, xs, out):
    kinds = spec.kinds
    assert [x.dtype for x in xs] == [cr.complex128 if k == "c" else cr.float64 for k in kinds]
    assert out.requires_grad, f"{spec}: the result does not require grad"
    assert "c" in kinds or out.dtype == cr.complex128, f"{spec}: no complex data anywhere"


@SPECS
def test_vjp_matches_central_differences(spec, rng):
    xs = spec.sample(rng)
    out = spec.fn(*xs)
    _check_dtypes(spec, xs, out)
    v = _like(out.data, rng)
    grads = _grads(out, xs, v)
    datas = [x.data.copy() for x in xs]
    for i, (x, g) in enumerate(zip(xs, grads)):
        assert g.dtype == x.dtype, f"input {i}: gradient {g.dtype} for a {x.dtype} input"
        expected = _fd_gradient(lambda ds: _inner(v, _value(spec, ds)), datas, i)
        np.testing.assert_allclose(g.data, expected, rtol=RTOL, atol=ATOL, err_msg=f"input {i}")


def _jvp(spec, xs, ts):
    with dual_level():
        duals = [make_dual(x.detach(), cr.tensor(t)) for x, t in zip(xs, ts)]
        out = spec.fn(*duals)
        tangent = unpack_dual(out).tangent
    return out, tangent


@SPECS
def test_jvp_matches_central_differences(spec, rng):
    xs = spec.sample(rng)
    ts = [_like(x.data, rng) for x in xs]
    out, tangent = _jvp(spec, xs, ts)
    assert tangent is not None and tangent.dtype == out.dtype
    datas = [x.data for x in xs]
    expected = (_value(spec, [d + H * t for d, t in zip(datas, ts)])
                - _value(spec, [d - H * t for d, t in zip(datas, ts)])) / (2 * H)
    np.testing.assert_allclose(tangent.data, expected, rtol=RTOL, atol=ATOL)


@SPECS
def test_jvp_and_vjp_are_adjoint(spec, rng):
    """Re<v, J t> from forward mode equals Re<J^H v, t> from reverse mode, without differences."""
    xs = spec.sample(rng)
    ts = [_like(x.data, rng) for x in xs]
    out = spec.fn(*xs)
    v = _like(out.data, rng)
    reverse = sum(_inner(g.data, t) for g, t in zip(_grads(out, xs, v), ts))
    forward = _inner(v, _jvp(spec, xs, ts)[1].data)
    assert forward == pytest.approx(reverse, rel=1e-10, abs=1e-10)


SECOND = pytest.mark.parametrize("spec", [s for s in COMPLEX_SPECS if s.order >= 2], ids=str)


def _first_order(spec, datas, v, create_graph=False):
    zs = [cr.tensor(d, requires_grad=True) for d in datas]
    return zs, _grads(spec.fn(*zs), zs, v, create_graph=create_graph)


@SECOND
def test_second_order_matches_central_differences_of_the_gradient(spec, rng):
    """Reverse over reverse: the gradient of M(z) = sum_i Re<u_i, grad_i L(z)> (L = Re<v, f(z)>)
    against central differences of the first-order gradient (reverse mode, no create_graph)."""
    xs = spec.sample(rng)
    datas = [x.data.copy() for x in xs]
    v = _like(_value(spec, datas), rng)
    us = [_like(d, rng) for d in datas]
    zs, gs = _first_order(spec, datas, v, create_graph=True)
    terms = [cr.real(cr.sum(g * np.conj(u))) for g, u in zip(gs, us) if g.requires_grad]
    second = _grads(sum(terms[1:], terms[0]), zs, 1.0) if terms else [cr.zeros_like(z) for z in zs]

    def m(ds):
        return sum(_inner(u, g.data) for u, g in zip(us, _first_order(spec, ds, v)[1]))
    for i, (z, g) in enumerate(zip(zs, second)):
        assert g.dtype == z.dtype
        np.testing.assert_allclose(g.data, _fd_gradient(m, datas, i), rtol=1e-5, atol=1e-6,
                                   err_msg=f"input {i}")


@SECOND
def test_forward_over_reverse_matches_central_differences_of_the_gradient(spec, rng):
    """The JVP of the gradient map z -> J(z)^H v along t against its central differences."""
    xs = spec.sample(rng)
    datas = [x.data.copy() for x in xs]
    v = _like(_value(spec, datas), rng)
    ts = [_like(d, rng) for d in datas]

    def gradient(*zs):
        return cr.vjp(spec.fn, *zs)[1](cr.tensor(v))
    _, tangents = cr.jvp(gradient, tuple(cr.tensor(d) for d in datas), tuple(cr.tensor(t) for t in ts))
    up = _first_order(spec, [d + H * t for d, t in zip(datas, ts)], v)[1]
    down = _first_order(spec, [d - H * t for d, t in zip(datas, ts)], v)[1]
    for i, (t, a, b) in enumerate(zip(tangents, up, down)):
        np.testing.assert_allclose(np.asarray(getattr(t, "data", t)), (a.data - b.data) / (2 * H),
                                   rtol=1e-5, atol=1e-6, err_msg=f"input {i}")


@SPECS
def test_gradcheck_passes_in_both_modes(spec, rng):
    """cr.gradcheck's complex check (both parts of every input and output) agrees on every row."""
    assert cr.gradcheck(spec.fn, spec.sample(rng), modes=("rev", "fwd"))


@SECOND
def test_gradgradcheck_passes(spec, rng):
    assert cr.gradgradcheck(spec.fn, spec.sample(rng))


TORCH = pytest.mark.parametrize("spec", [s for s in COMPLEX_SPECS if s.torch_fn is not None], ids=str)


@TORCH
def test_matches_torch(spec, rng):
    """Values and gradients (for a random complex cotangent) equal PyTorch's, dtypes included."""
    torch = pytest.importorskip("torch")
    xs = spec.sample(rng)
    out = spec.fn(*xs)
    v = _like(out.data, rng)
    out.backward(cr.tensor(v))
    txs = [torch.tensor(x.data, requires_grad=True) for x in xs]
    tout = spec.torch_fn(*txs)
    np.testing.assert_allclose(out.data, tout.detach().resolve_conj().numpy(), rtol=1e-10, atol=1e-12)
    tout.backward(torch.tensor(v))
    for i, (x, tx) in enumerate(zip(xs, txs)):
        expected = np.zeros(x.shape, x.dtype) if tx.grad is None else tx.grad.resolve_conj().numpy()
        assert x.grad.dtype == expected.dtype, f"input {i}: gradient {x.grad.dtype}, torch's {expected.dtype}"
        np.testing.assert_allclose(x.grad.data, expected, rtol=1e-10, atol=1e-12, err_msg=f"input {i}")


# ----- completeness, and the ops that refuse -----
def _capable(p):
    return p.complex is not None and p.vjps is not None


def test_every_complex_capable_primitive_has_a_complex_spec():
    capable = {n for n, p in cr.PRIMITIVES.items() if _capable(p)}
    missing = capable - {s.name for s in COMPLEX_SPECS}
    assert not missing, f"complex-capable primitives without a COMPLEX_SPECS row: {sorted(missing)}"
    assert len(capable) >= 60


def test_complex_specs_name_complex_capable_primitives():
    for s in COMPLEX_SPECS:
        assert s.complex and len(s.kinds) == len(s.shapes) and set(s.kinds) <= {"c", "r"}, s
        assert s.name in cr.PRIMITIVES and _capable(cr.PRIMITIVES[s.name]), s
    ids = [str(s) for s in COMPLEX_SPECS]
    assert len(ids) == len(set(ids)), "duplicate spec ids"


class _Ops:
    """Records the primitives run, with whether any input or the output is complex."""

    def __init__(self):
        self.seen = set()

    def on_op(self, prim, datas, params, out):
        arrays = [np.asarray(d) for d in datas if isinstance(d, (np.ndarray, np.generic))] + [np.asarray(out)]
        self.seen.add((prim.name, any(a.dtype.kind == "c" for a in arrays)))

    def on_save(self, node):
        pass

    def on_save_function(self, ctx):
        pass


def _run_observed(fn, xs):
    """The (primitive, on complex data) pairs that ``fn(*xs)`` runs, without recording a graph."""
    ops = _Ops()
    add_to("observers", ops)
    try:
        with cr.no_grad():
            fn(*xs)
    finally:
        remove_from("observers", ops)
    return ops.seen


@SPECS
def test_each_spec_runs_its_primitive_on_complex_data(spec, rng):
    seen = _run_observed(spec.fn, spec.sample(rng))
    assert (spec.name, True) in seen, f"{spec} never runs {spec.name} on complex data: {sorted(seen)}"


def _refusing():
    params = []
    for name, p in cr.PRIMITIVES.items():
        if p.complex is None and p.vjps is not None:
            marks = [pytest.mark.xfail(strict=True, reason=_KNOWN_GAPS[name])] if name in _KNOWN_GAPS else []
            params.append(pytest.param(name, marks=marks, id=name))
    return params


# A complex input with a real result would never reach the complex check (it looks at the result's
# dtype): such a gap is listed here, with why (none today: slogdet of complex input runs logdet,
# whose complex result is log det).
_KNOWN_GAPS: dict = {}


@pytest.mark.parametrize("name", _refusing())
def test_primitives_without_a_complex_derivative_refuse_one(name, rng):
    spec = next(s for s in OP_SPECS if s.name == name)
    datas = [x.data + 1j * rng.uniform(-0.5, 0.5, x.shape) for x in spec.sample(rng)]
    try:
        ops = _run_observed(spec.fn, [cr.tensor(d) for d in datas])
    except (TypeError, ValueError, cr.DTypeError):
        pytest.skip(f"NumPy does not compute {name} of complex data")
    if (name, True) not in ops:
        pytest.skip(f"{spec} of complex data runs no {name} (another primitive takes complex data)")
    with pytest.raises(cr.DTypeError, match=rf"^{name}: no complex derivative \(backward"):
        spec.fn(*[cr.tensor(d, requires_grad=True) for d in datas])
    with pytest.raises(cr.DTypeError, match=rf"^{name}: no complex derivative \(forward-mode"):
        _jvp(spec, [cr.tensor(d) for d in datas], [_like(d, rng) for d in datas])
